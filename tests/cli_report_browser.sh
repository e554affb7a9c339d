#!/usr/bin/env bash
# The report in a real browser: headless Chromium (Debian's chromium; `make test` installs it
# where it can) loads a page drawn from committed GPU results plus a detailed CPU run, dumps its
# DOM and takes a screenshot; the checks are that it rendered whole and that charts fill the page.
# Skipped (77) without chromium. Usage: tests/cli_report_browser.sh path/to/roseinfer
source "$(dirname "$0")/cli-common.bash"

CHROMIUM=""
for candidate in chromium chromium-browser google-chrome; do
  command -v "$candidate" >/dev/null && { CHROMIUM=$(command -v "$candidate"); break; }
done
[ -n "$CHROMIUM" ] || { echo "skip: no chromium (apt-get install chromium)"; exit 77; }
command -v python3 >/dev/null || { echo "skip: no python3 to read the screenshot"; exit 77; }

"$BIN" bench datasets/sample.jsonl "${COMMON[@]}" --mode all --save-detailed \
  --json "$TMP/detailed.json" >/dev/null 2>&1
R=results/2026-11-21-h100
"$BIN" report "$TMP/detailed.json" $R/seed000.json -o "$TMP/report.html" 2>/dev/null
check "report written" test -s "$TMP/report.html"

FLAGS=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars
  --no-first-run --user-data-dir="$TMP/profile" --window-size=1400,2400)
timeout 120 "$CHROMIUM" "${FLAGS[@]}" --dump-dom "file://$TMP/report.html" >"$TMP/dom.html" 2>"$TMP/chromium.log"
check "chromium loads the page" test $? -eq 0
expected=$(grep -o '<svg class="chart"' "$TMP/report.html" | wc -l)
rendered=$(grep -o '<svg class="chart"' "$TMP/dom.html" | wc -l)
check "every chart ($expected) is in the rendered DOM ($rendered)" test "$expected" -gt 10 -a "$rendered" -eq "$expected"
check "the page rendered to its end" grep -q "Written by roseinfer report" "$TMP/dom.html"

timeout 120 "$CHROMIUM" "${FLAGS[@]}" --screenshot="$TMP/shot.png" "file://$TMP/report.html" 2>>"$TMP/chromium.log"
check "chromium takes a screenshot" test -s "$TMP/shot.png"
check "the charts occupy the page (screenshot)" python3 tests/png_coverage.py "$TMP/shot.png"
[ -n "${REPORT_SCREENSHOT:-}" ] && cp "$TMP/shot.png" "$REPORT_SCREENSHOT" && cp "$TMP/report.html" "${REPORT_SCREENSHOT%.png}.html"
[ $fails -eq 0 ] || tail -20 "$TMP/chromium.log"
finish report-browser
