#!/usr/bin/env bash
# Run shellcheck over every shell script under hack/: the *.sh files and the
# extensionless ones whose shebang names sh, bash, dash or busybox sh (the
# test guest's init, udhcpc and acpid scripts). Files a script sources are
# followed from the script (-x, paths relative to it or per a
# `# shellcheck source=` directive). `make lint` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts=()
while IFS= read -r -d '' f; do
	if [[ $f == *.sh ]]; then
		scripts+=("$f")
	elif [ -f "$f" ] && head -n1 "$f" | grep -qE '^#!.*(/|env |busybox )(ba|da)?sh( |$)'; then
		scripts+=("$f")
	fi
done < <(git ls-files -z hack)
shellcheck -x --source-path=SCRIPTDIR "${scripts[@]}"
