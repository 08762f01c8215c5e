#!/usr/bin/env bash
# The HTML report in a real browser: runs a small example study with `cotune run`, writes its report
# with `cotune report`, renders it in headless Chromium (screenshot and DOM), and checks the page:
# every section and its charts present, one table row per trial, no console errors. Then the report
# of every study under examples/studies, each with the answer first and no section failed inside.
#
# usage: report_browser_test.sh COTUNE_CLI WORK_DIR [one|examples]
# Exits 77 (skipped) when Chromium is not installed (scripts/install-deps --test installs it).
set -euo pipefail

cli=${1:?usage: report_browser_test.sh COTUNE_CLI WORK_DIR [one|examples]}
work=${2:?usage: report_browser_test.sh COTUNE_CLI WORK_DIR [one|examples]}
scope=${3:-examples}  # one: only the test's own study (sanitizer builds: the examples' runs take minutes)
examples=$(cd "$(dirname "$0")/../../examples/studies" && pwd)

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [[ -z "$browser" ]]; then
  echo "SKIP: no chromium found (install Debian's chromium: scripts/install-deps --test)"
  exit 77
fi

fail() { echo "FAIL: $*" >&2; exit 1; }
# The rendered HTML of one section of the page.
section_of() { awk -v id="$1" 'BEGIN{RS="</section>"} index($0, "<section id=\"" id "\">"){print; exit}' dom.html; }

rm -rf "$work"
mkdir -p "$work"
cd "$work"

cat > study.json <<'JSON'
{
  "name": "browser-check",
  "description": "An example study <check> & \"quotes\" rendered by the browser test",
  "workload": {
    "model": {"preset": "llama3-8b"},
    "training": {"global_batch": 256},
    "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}
  },
  "space": {"name": "llm", "options": {"tp": [1, 2, 4, 8], "pp": [1, 2], "cp": [1], "vpp": [1], "zero": [1],
                                       "micro_batch": [1, 2]}},
  "predictor": {"name": "krr"},
  "searcher": "random",
  "executor": {"name": "sim", "options": {"noise": 0.05, "seed": 3}},
  "objective": {"metric": "tokens_per_s", "direction": "maximize"},
  "budget": {"trials": 20},
  "format": "megatron",
  "seed": 3
}
JSON
study=browser-check

"$cli" run study.json --store cotune.db > run.log 2>&1 || { cat run.log; fail "cotune run failed"; }
"$cli" report "$study" --store cotune.db -o report.html > report.log 2>&1 || { cat report.log; fail "cotune report failed"; }
[[ -s report.html ]] || fail "report.html is empty"

# The number of trials, as `cotune show` lists them (rows between the TRIAL header and the blank line).
# (Written to a file first: awk stops reading early, and under pipefail a SIGPIPE to `cotune show`
# would end this script without a word.)
"$cli" show "$study" --store cotune.db > show.txt || fail "cotune show failed"
trials=$(awk '/^TRIAL /{on=1; next} on && /^$/{exit} on{n++} END{print n+0}' show.txt)
[[ "$trials" -gt 0 ]] || fail "the study has no trials"

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --disable-extensions --hide-scrollbars --window-size=1280,4000)
url="file://$work/report.html"

# Each run gets a new empty profile.
"$browser" "${flags[@]}" --user-data-dir="$work/profile-shot" --screenshot="$work/report.png" \
  --enable-logging=stderr --v=0 "$url" > shot.out 2> shot.err || { cat shot.err; fail "chromium --screenshot failed"; }
[[ -s report.png ]] || fail "no screenshot written"
[[ "$(head -c 8 report.png | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] || fail "the screenshot is not a PNG"

"$browser" "${flags[@]}" --user-data-dir="$work/profile-dom" --dump-dom --enable-logging=stderr --v=0 "$url" \
  > dom.html 2> dom.err || { cat dom.err; fail "chromium --dump-dom failed"; }
[[ -s dom.html ]] || fail "the DOM dump is empty"

# No console errors (there is no script at all, so any is a bug), no refused resource.
if grep -E "Uncaught|CONSOLE\(|ERR_FILE_NOT_FOUND|Refused to" shot.err dom.err; then
  fail "console errors while rendering the report"
fi

# Structure: the sections, charts in them, and one row per trial in the table of all trials.
for id in answer study best convergence prediction parameters parallel breakdown failures trials; do
  grep -q "<section id=\"$id\">" dom.html || fail "section '$id' missing from the rendered page"
done
svgs=$(grep -o "<svg" dom.html | wc -l)
[[ "$svgs" -ge 5 ]] || fail "expected at least 5 charts, found $svgs"
# Section-wise: convergence, prediction and parameters each hold a chart.
for id in convergence prediction parameters breakdown; do
  section_of "$id" > section.html
  grep -q "<svg" section.html || fail "section '$id' has no chart"
done
# The first screen answers: the first section is the answer, naming the configuration to launch and
# what the search cost.
first=$(grep -o '<section id="[a-z]*">' dom.html | head -1)
[[ "$first" == '<section id="answer">' ]] || fail "the first section is $first, not the answer"
section_of answer > section.html
grep -q "Search cost:" section.html || fail "the answer does not say what the search cost"
grep -q "<strong>tp=" section.html || fail "the answer does not name a configuration"
section_of trials > section.html
rows=$(grep -o "<tr>" section.html | wc -l)
rows=$((rows - 1))  # the header row
[[ "$rows" -eq "$trials" ]] || fail "the trials table has $rows rows, the study has $trials trials"
# The study's description arrives escaped, as text (a study name is letters, digits and . _ -).
grep -q "study &lt;check&gt; &amp;" dom.html || fail "the study description is not shown escaped"
if grep -q "<check>" dom.html; then fail "unescaped markup from the study description reached the DOM"; fi

# Every example study's report, rendered by the browser: each section there, none failed inside,
# the answer first, no console error. A few trials each (the ads workload with random search: its
# validity check is expensive).
pages=0
[[ "$scope" == examples ]] || examples=/nonexistent
for file in "$examples"/*.json; do
  [[ -f "$file" ]] || continue
  name=$(basename "$file" .json)
  python3 - "$file" "example-$name.json" <<'PY'
import json, sys
study = json.load(open(sys.argv[1]))
study["budget"] = {"trials": 4}
if study["name"] == "recsys-ads-128xh100":
    study["searcher"] = "random"
json.dump(study, open(sys.argv[2], "w"))
PY
  "$cli" run "example-$name.json" --store examples.db > "example-$name.log" 2>&1 || { cat "example-$name.log"; fail "$name: cotune run failed"; }
  "$cli" report "$name" --store examples.db -o "example-$name.html" > /dev/null 2>&1 || fail "$name: cotune report failed"
  "$browser" "${flags[@]}" --user-data-dir="$work/profile-$name" --dump-dom --enable-logging=stderr --v=0 \
    "file://$work/example-$name.html" > dom.html 2> "example-$name.err" || fail "$name: chromium --dump-dom failed"
  if grep -E "Uncaught|CONSOLE\(|ERR_FILE_NOT_FOUND|Refused to" "example-$name.err"; then fail "$name: console errors"; fi
  first=$(grep -o '<section id="[a-z]*">' dom.html | head -1)
  [[ "$first" == '<section id="answer">' ]] || fail "$name: the first section is $first, not the answer"
  for id in answer study best convergence prediction parameters parallel failures trials; do
    grep -q "<section id=\"$id\">" dom.html || fail "$name: section '$id' missing"
  done
  if grep -q "could not be produced\|No partial dependence" dom.html; then
    grep -o "could not be produced[^<]*\|No partial dependence[^<]*" dom.html
    fail "$name: a section failed inside"
  fi
  pages=$((pages + 1))
done

echo "PASS: $svgs charts, $rows trial rows, screenshot $(stat -c %s report.png) bytes; $pages example reports"
