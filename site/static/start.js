// The start page follows the browser's language: Chinese browsers go to zh/, others to en/.
(function () {
  var langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"];
  var first = String(langs[0] || "en").toLowerCase();
  location.replace(first.indexOf("zh") === 0 ? "zh/" : "en/");
})();
