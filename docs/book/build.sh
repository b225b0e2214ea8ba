#!/usr/bin/env bash
# `make book`: builds the book into target/book/ and checks every link in it (a page
# that does not exist, or an `#anchor` that is no heading of its page, fails the run).
# The catalog reference page is generated from the catalog's types and checked by the
# library's tests (`schedkit catalog reference` writes it). The README's links to files of
# the repository are checked too.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
"$root/infra/install-book-tools.sh"
"$root/infra/.cache/mdbook/bin/mdbook" build "$here"
# LinkChecker run as root drops to `nobody`: it checks a world-readable copy.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$root/target/book/." "$copy/"
chmod -R a+rX "$copy"
if ! "$root/infra/.cache/book-venv/bin/linkchecker" -f "$here/linkcheckerrc" --no-status \
    "$copy/index.html" >"$copy.log" 2>&1; then
    cat "$copy.log" >&2
    rm -f "$copy.log"
    echo "book: broken links (above)" >&2
    exit 1
fi
rm -f "$copy.log"
# The README's links into the repository (the book's chapters, mostly) lead to files.
missing=0
while read -r target; do
    if [ ! -e "$root/${target%%#*}" ]; then
        echo "book: README.md links to $target, which does not exist" >&2
        missing=1
    fi
done < <(grep -oE '\]\([^)#:]+(#[^)]*)?\)' "$root/README.md" | sed -E 's/^\]\((.*)\)$/\1/')
[ "$missing" = 0 ] || exit 1
# The README is the front door, not the manual: under 200 lines.
lines=$(wc -l <"$root/README.md")
if [ "$lines" -ge 200 ]; then
    echo "book: README.md has $lines lines; it stays under 200 (the rest belongs in the book)" >&2
    exit 1
fi
echo "book: built into target/book/, every link inside it checked"
