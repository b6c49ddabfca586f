#!/bin/sh
# Writes NAME.out for every case in cases.txt with Debian's ministat 20150715
# (package `ministat`, /usr/bin/ministat), the tool `--classic` must match.
# That version has no -q; for a -q case it runs without -q and drops what
# -q leaves out: the legend lines at the top and the table's header line.
set -eu
cd "$(dirname "$0")"
grep -v -e '^#' -e '^$' cases.txt | while IFS= read -r line; do
    name=${line%%:*}
    args=${line#*:}
    input=/dev/null
    case $args in
    *'<'*)
        input=$(echo "${args#*<}" | tr -d ' ')
        args=${args%%<*}
        ;;
    esac
    case " $args " in
    *' -q '*)
        args=$(echo " $args " | sed 's/ -q / /')
        # shellcheck disable=SC2086
        /usr/bin/ministat $args <"$input" |
            awk 'top != 1 && /^[x+*%#@O] / { next }
                 { top = 1 }
                 /^    N           Min/ { next }
                 { print }' >"$name.out"
        ;;
    *)
        # shellcheck disable=SC2086
        /usr/bin/ministat $args <"$input" >"$name.out"
        ;;
    esac
done
