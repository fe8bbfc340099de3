// Copy buttons, the language switch keeping the #anchor, and search (Pagefind, both languages).
(function () {
  "use strict";

  function onReady(fn) {
    if (document.readyState !== "loading") fn(); else document.addEventListener("DOMContentLoaded", fn);
  }

  function setUpCopyButtons() {
    document.querySelectorAll("[data-copy]").forEach(function (button) {
      button.addEventListener("click", function () {
        var code = button.parentElement.querySelector("code");
        if (!code || !navigator.clipboard) return;
        navigator.clipboard.writeText(code.textContent).then(function () {
          var label = button.textContent;
          button.textContent = button.getAttribute("data-copied");
          setTimeout(function () { button.textContent = label; }, 1500);
        });
      });
    });
  }

  function keepAnchorOnLanguageSwitch() {
    var link = document.querySelector("[data-lang-switch]");
    if (!link) return;
    link.addEventListener("click", function () {
      if (location.hash) link.setAttribute("href", link.getAttribute("href").split("#")[0] + location.hash);
      if (location.search && document.getElementById("search-input")) {
        link.setAttribute("href", link.getAttribute("href").split("?")[0] + location.search);
      }
    });
  }

  // -- search --

  function element(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text) node.textContent = text;
    return node;
  }

  // Pagefind excerpts carry <mark> around matches; keep only that markup, as text nodes otherwise.
  function appendExcerpt(parent, excerpt) {
    var parts = String(excerpt || "").split(/(<mark>|<\/mark>)/);
    var marked = false;
    parts.forEach(function (part) {
      if (part === "<mark>") { marked = true; return; }
      if (part === "</mark>") { marked = false; return; }
      var text = part.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'").replace(/&amp;/g, "&");
      parent.appendChild(marked ? element("mark", null, text) : document.createTextNode(text));
    });
  }

  function siteRoot() {
    return new URL(document.body.getAttribute("data-root") || "./", location.href);
  }

  var pagefindPromise = null;
  function loadPagefind() {
    if (!pagefindPromise) {
      var root = siteRoot();
      pagefindPromise = import(new URL("pagefind/pagefind.js", root).href).then(function (pagefind) {
        return pagefind.options({ baseUrl: root.pathname }).then(function () { return pagefind; });
      });
    }
    return pagefindPromise;
  }

  function runSearch(query) {
    var status = document.getElementById("search-status");
    var list = document.getElementById("search-results");
    var lang = document.body.getAttribute("data-lang");
    list.textContent = "";
    if (!query) { status.textContent = ""; return; }
    status.textContent = status.getAttribute("data-loading");
    loadPagefind().then(function (pagefind) {
      return pagefind.search(query);
    }).then(function (search) {
      return Promise.all(search.results.slice(0, 40).map(function (r) { return r.data(); }));
    }).then(function (results) {
      // This language's pages first, the other language's after; Pagefind's order within each.
      var mine = results.filter(function (r) { return (r.filters.lang || [])[0] === lang; });
      var other = results.filter(function (r) { return (r.filters.lang || [])[0] !== lang; });
      var ordered = mine.concat(other).slice(0, 20);
      status.textContent = ordered.length ? ordered.length + " " + status.getAttribute("data-count")
        : status.getAttribute("data-empty");
      ordered.forEach(function (r) {
        var item = element("li", "search-result");
        var link = element("a", null, (r.meta && r.meta.title) || r.url);
        link.href = r.url;
        var heading = element("p", "result-title");
        heading.appendChild(link);
        var resultLang = (r.filters.lang || [])[0];
        if (resultLang && resultLang !== lang) heading.appendChild(element("span", "badge", resultLang));
        item.appendChild(heading);
        var excerpt = element("p", "result-excerpt");
        appendExcerpt(excerpt, r.excerpt);
        item.appendChild(excerpt);
        list.appendChild(item);
      });
    }).catch(function (err) {
      status.textContent = status.getAttribute("data-unavailable");
      if (window.console) console.warn("search unavailable:", err && err.message);
    });
  }

  function setUpSearchPage() {
    var form = document.querySelector("[data-search-form]");
    if (!form) return;
    var input = document.getElementById("search-input");
    var query = new URLSearchParams(location.search).get("q") || "";
    input.value = query;
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var q = input.value.trim();
      history.replaceState(null, "", "?q=" + encodeURIComponent(q));
      runSearch(q);
    });
    runSearch(query.trim());
  }

  onReady(function () {
    setUpCopyButtons();
    keepAnchorOnLanguageSwitch();
    setUpSearchPage();
  });
})();
