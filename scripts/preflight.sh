#!/usr/bin/env bash
# make test's preflight: before any test runs, names every program the tests
# need that this machine lacks, with the command that installs it, in one
# message, and exits 1. The programs are the README's Prerequisites; the
# code runs them (exec.Command / exec.LookPath):
#   initdb, postgres   internal/pgcluster: every throw-away cluster
#   promtool           internal/alertrules: the alert rules' tests
#   prometheus         internal/exporter: the end-to-end scrape
#   gcc                go test -race (cgo)
#   go                 everything, and ops/opstest's outside-module test
# With OPSDESK_TEST_DSN set the tests still start clusters of their own
# (pgcluster's tests, the fault tests, the demo's), so the server binaries
# are needed either way.
#
#   scripts/preflight.sh                    the message, exit 1 if anything is missing
#   scripts/preflight.sh --debian-packages  only the Debian packages to install, one a
#                                           line (.ci/run installs them), exit 0
set -o pipefail # no -u: macOS bash 3.2 calls an empty array unbound
export PATH="$PATH:/usr/local/go/bin"

missing=()  # "program (what needs it)"
debian=()   # Debian/Ubuntu packages
brew=()     # macOS formulae
need() {    # need PROGRAM WHY DEBIAN-PACKAGE BREW-FORMULA
	command -v "$1" >/dev/null 2>&1 && return
	missing+=("$1 ($2)")
	[[ " ${debian[*]} " == *" $3 "* ]] || debian+=("$3")
	[[ " ${brew[*]} " == *" $4 "* ]] || brew+=("$4")
}

other=()    # install steps no package manager line covers
if ! command -v go >/dev/null 2>&1; then
	missing+=("go (Go 1.26: every test)")
	other+=("Go 1.26: https://go.dev/dl/ (unpacked in /usr/local/go, as .ci/run expects)")
fi

# initdb and postgres: on PATH or in Debian's /usr/lib/postgresql/*/bin, as
# internal/pgcluster looks for them.
server=""
for dir in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")" /usr/lib/postgresql/*/bin; do
	if [[ -x $dir/initdb && -x $dir/postgres ]]; then
		server=$dir
		break
	fi
done
if [[ -z $server ]]; then
	missing+=("initdb and postgres (PostgreSQL 14 or later: the server binaries, on PATH or under /usr/lib/postgresql/*/bin; every test against the database)")
	debian+=(postgresql)
	brew+=(postgresql)
fi

need promtool "the alert rules' tests" prometheus prometheus
need prometheus "the exporter's end-to-end test" prometheus prometheus

# The race detector needs cgo: a C compiler that can link a program (Go's
# default is gcc on Linux, clang on macOS).
if [[ $(uname -s) == Darwin ]]; then
	if ! command -v clang >/dev/null 2>&1; then
		missing+=("clang (go test -race uses cgo)")
		other+=("clang on macOS: xcode-select --install")
	fi
elif ! command -v gcc >/dev/null 2>&1; then
	missing+=("gcc (go test -race uses cgo)")
	debian+=(gcc libc6-dev)
elif ! echo 'int main(void) { return 0; }' | gcc -x c - -o /dev/null >/dev/null 2>&1; then
	missing+=("the C library's headers (gcc cannot link a program; go test -race uses cgo)")
	debian+=(libc6-dev)
fi

if [[ ${1:-} == --debian-packages ]]; then
	((${#debian[@]})) && printf '%s\n' "${debian[@]}"
	exit 0
fi
if ((${#missing[@]} == 0)); then
	exit 0
fi
{
	echo "make test: missing on this machine, so no test ran:"
	for m in "${missing[@]}"; do
		echo "  - $m"
	done
	echo "Install them, then run make test again:"
	if ((${#debian[@]})); then
		echo "  Debian/Ubuntu: sudo apt-get install -y ${debian[*]}"
	fi
	if ((${#brew[@]})); then
		echo "  macOS:         brew install ${brew[*]}"
	fi
	for o in "${other[@]}"; do
		echo "  $o"
	done
	echo "(README.md, Prerequisites; .ci/run installs them on a fresh Debian machine.)"
} >&2
exit 1
