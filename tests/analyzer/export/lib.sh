# Sourced by the t_*.sh scripts of tfdump --export: arguments, a scratch
# directory, the tfdump tests' assertions (../tfdump/lib.sh) and the
# timeline readers (timeline.py, importable from the python checks).
# Usage inside a test: source "$(dirname "$0")/lib.sh" "$@"
#   arguments: TFDUMP TFT_SAMPLE MK_ODD PROTO (the schema subset)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../tfdump/lib.sh" "$1" "$2" "${3:-}"
PROTO=$4
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
