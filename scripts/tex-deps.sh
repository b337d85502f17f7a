#!/usr/bin/env bash
# Best effort: install pdflatex and booktabs (Debian texlive-latex-base and
# texlive-latex-recommended) so tests/report/test_latex.py can compile report.tex.
# Without them (not root, no apt-get, no network) that test skips and says why; this
# script never fails the caller.
set -u
pkgs=(texlive-latex-base texlive-latex-recommended)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
(( ${#missing[@]} )) || exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "tex-deps: ${missing[*]} missing (not root or no apt-get): the LaTeX test will skip" >&2
    exit 0
fi
echo "tex-deps: installing ${missing[*]}" >&2
apt=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
{ DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" \
    || { apt-get -q -o DPkg::Lock::Timeout=300 update \
         && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}"; }; } \
    >/tmp/ccpo-tex-apt.log 2>&1 \
    || echo "tex-deps: install failed (see /tmp/ccpo-tex-apt.log): the LaTeX test will skip" >&2
exit 0
