#!/bin/sh
# The last modification time of training logs, for node exporter's textfile collector
# (node_exporter --collector.textfile.directory=DIR). Run it every minute, e.g. from cron:
#
#   * * * * * /usr/local/bin/training-log-age.sh /var/lib/node_exporter/textfile '/scratch/*/train.log'
#
# It writes DIR/training_log.prom with one sample per log:
#   training_log_mtime_seconds{log_path="/scratch/run7/train.log"} 1767225600
# and the rule TrainingLogSilent (rules.yml) fires when one stops moving.
set -eu
dir=$1
shift
out="$dir/training_log.prom"
tmp="$out.$$"
trap 'rm -f "$tmp"' EXIT
{
  echo '# HELP training_log_mtime_seconds Last modification of a training log (Unix time).'
  echo '# TYPE training_log_mtime_seconds gauge'
  for pattern in "$@"; do
    for log in $pattern; do   # unquoted on purpose: the pattern is a glob
      [ -f "$log" ] || continue
      case $log in *'
'*) continue ;; esac          # a name with a newline cannot be a label value
      label=$(printf '%s' "$log" | sed 's/\\/\\\\/g; s/"/\\"/g')
      printf 'training_log_mtime_seconds{log_path="%s"} %s\n' "$label" "$(stat -c %Y "$log")"
    done
  done
} > "$tmp"
mv "$tmp" "$out"   # a rename: node exporter never reads half a file
trap - EXIT
