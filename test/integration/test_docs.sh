#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator's documentation names only what exists (docs_check.py): every relative link and
# its anchor, every source-tree path, every path of the packages (in the .deb's and the .rpm's
# file lists; documentation paths in both), every `pullgatectl` command and option (against the
# built binaries' --help), pullgate-cri's, pullgate-webhook's, pullgate-hook's and make-certs.sh's
# options, every configuration key (plugin/base/config.c's table; the README's table and
# pullgate.json(5) list them all), every metric and recording rule; the README's first 40 lines
# hold the node path, whose block is docs/install.md's.
# Then the same check on documents with one mistake each (a misspelt package path, option,
# command, key, metric, anchor; a guide the package does not ship; the RPM's documentation
# directory; a man page citing the source tree; the node path pushed down the README; the
# README's block drifting from the guide's): each is refused, naming it. Needs the build (PULLGATECTL, PG_BUILD_DIR); seconds.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/common.sh
source "$HERE/lib/common.sh"

pg_require_pullgate
[[ -x "${PG_BUILD_DIR:-}/cri/pullgate-cri" ]] || pg_skip "pullgate-cri not built (its --help is checked)"
SRC="$PG_SOURCE_DIR"
W="$(pg_mktemp_dir docs)"
T0=$SECONDS

pg_section "the documents as they are"
if python3 "$HERE/docs_check.py" "$SRC" "$PG_BUILD_DIR" >"$W/clean.out" 2>"$W/clean.err"; then
    pg_check_ok "docs_check: $(tail -n1 "$W/clean.err")"
else
    pg_check_fail "docs_check: $(tail -n1 "$W/clean.err")"
    sed 's/^/       | /' "$W/clean.out" "$W/clean.err" >&2
fi

pg_section "one mistake per document: each is found"
# mutate REL SED-SCRIPT: a copy of REL with the mistake, handed to docs_check with --replace.
REPLACE=()
mutate() {
    local rel="$1" copy
    copy="$W/$(echo "$rel" | tr / _)"
    [[ -e "$copy" ]] || cp "$SRC/$rel" "$copy"
    sed -i "$2" "$copy"
    cmp -s "$SRC/$rel" "$copy" && pg_fail "the mutation '$2' changed nothing in $rel"
    REPLACE+=(--replace "$rel=$copy")
}
mutate docs/lifecycle.md 's|/usr/libexec/pullgate/pullgate-still-wired|/usr/libexec/pullgate/pullgate-stil-wired|'
mutate docs/install.md 's|^pullgatectl wire --runtime cri-o \&\&|pullgatectl wire --runtime cri-o --hook-sockett x \&\&|'
mutate docs/install.md 's|(lifecycle.md#what-each-check-means)|(lifecycle.md#what-each-check-mean)|'
mutate docs/kubelet-setup.md 's|^`criListen` defaults to|`criListenn` defaults to|'
mutate docs/metrics.md '0,/`pullgate_cri_calls_total`/s||`pullgate_cri_call_total`|'
mutate docs/logging.md '$a\\\n`pullgatectl wires` and `make-certs.sh renw`\n'
mutate README.md '/^| `criVerifyPulls` |/d'
mutate README.md '/^pullgatectl doctor  /d'
mutate README.md '2i\\\nA\nB\nC\nD\nE\nF\nG\nH\nI\nJ\nK\nL\nM\nN\nO\nP\nQ\nR\nS\nT\nU\nV\nW\nX\nY\nZ'
mutate packaging/debian/pullgate.docs '/docs\/install.md/d'
mutate packaging/rpm/pullgate.spec '/_docdir_fmt/d'
mutate docs/man/pullgate-cri.8 '0,/^\.IR \/usr\/share\/doc\/pullgate\/metrics\.md \.$/s||docs/metrics.md.|'
python3 "$HERE/docs_check.py" "$SRC" "$PG_BUILD_DIR" "${REPLACE[@]}" >"$W/bad.out" 2>"$W/bad.err"
rc=$?
((rc == 1)) && pg_check_ok "the check fails: $(grep -c . "$W/bad.out") problem(s)" ||
    pg_check_fail "docs_check exited $rc on the mutated documents: $(tail -n3 "$W/bad.err")"
found() { # WHAT TEXT: a problem line holds TEXT
    if grep -qF -- "$2" "$W/bad.out"; then pg_check_ok "found: $1: $(grep -m1 -F -- "$2" "$W/bad.out")"; else
        pg_check_fail "not found: $1 ('$2')"
    fi
}
found "a misspelt package path" "names /usr/libexec/pullgate/pullgate-stil-wired: no package ships it"
found "a misspelt option" "pullgatectl wire --hook-sockett: not an option"
found "an anchor that is not a heading" "docs/lifecycle.md has no heading #what-each-check-mean"
found "a misspelt configuration key" '`criListenn`: not a configuration key'
found "a misspelt metric" "names the metric pullgate_cri_call_total, which no daemon defines"
found "a command pullgatectl does not have" "pullgatectl wires: not a command"
found "a make-certs.sh command it does not have" "make-certs.sh renw: not a command it documents"
found "a key missing from the README's table" "the configuration table lacks \`criVerifyPulls\`"
found "the README's block drifting from the guide's" "its installation block is not docs/install.md's"
found "the node path pushed below the README's 40th line" "its first 40 lines do not hold the node path's step"
found "a guide the .deb does not ship" "pullgatectl.8: names /usr/share/doc/pullgate/install.md: not in both packages"
found "README.Debian naming a document the package lacks" "pullgate.README.Debian: names /usr/share/doc/pullgate/install.md"
found "a man page citing the source tree" "pullgate-cri.8: names docs/metrics.md, a path of the source tree"
found "the RPM's documentation directory not pullgate's" "names /usr/share/doc/pullgate/lifecycle.md: not in both packages"
pg_log "test_docs: $((SECONDS - T0)) s"
pg_summary
