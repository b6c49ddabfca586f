#!/bin/sh
# Writes NAME.out (standard output), NAME.err (standard error, when not empty)
# and NAME.status (exit status, when not 0) for every case in cases.txt, as
# today's FreeBSD ministat (usr.bin/ministat in FreeBSD's source tree) prints
# them: the tool the default `cargo xtask ministat` must match byte for byte.
#
# Usage: FREEBSD_MINISTAT=/path/to/ministat ./regen.sh
#
# The binary is not part of the project. Run it on FreeBSD, or build
# FreeBSD's ministat.c elsewhere with what FreeBSD's libc would do in place of
# the host's: BSD getopt (options end at the first operand; "illegal option"
# messages), BUFSIZ 1024, FreeBSD's qsort, a NaN printed without its sign,
# realloc(p, 0) returning an object. Standard output must not be a terminal.
set -eu
: "${FREEBSD_MINISTAT:?set FREEBSD_MINISTAT to FreeBSD's ministat}"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
grep -v -e '^#' -e '^$' "$here/cases.txt" | while IFS= read -r line; do
    name=${line%%:*}
    args=${line#*:}
    input=/dev/null
    case $args in
    *'<'*)
        input=$(echo "${args#*<}" | tr -d ' ')
        args=${args%%<*}
        ;;
    esac
    status=0
    # shellcheck disable=SC2086
    "$FREEBSD_MINISTAT" $args <"$input" >"$here/$name.out" 2>"$here/$name.err" || status=$?
    [ -s "$here/$name.err" ] || rm -f "$here/$name.err"
    rm -f "$here/$name.status"
    [ "$status" -eq 0 ] || echo "$status" >"$here/$name.status"
done
