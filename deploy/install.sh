#!/bin/sh
# Installs Tigress as two systemd services, or removes it (deploy/systemd/README.md).
#
#   deploy/install.sh install      (what `make install` runs; run it again to upgrade)
#   deploy/install.sh uninstall    (what `make uninstall` runs)
#
# Needs root, systemd, and a Python 3.11+ with its venv module (Debian: python3-venv).
# Variables:
#   WHEELHOUSE=DIR   install offline: pip --no-index --find-links=DIR (`make wheelhouse`
#                    builds DIR on a connected machine with the same Python and arch)
#   PYTHON=PATH      the interpreter of the service venv (default /usr/bin/python3); not
#                    under /root or /home, which the units' ProtectHome=yes hides
#
# What it writes, and nothing else (uninstall removes exactly this):
#   /opt/tigress/venv, /opt/tigress/README.md        the program and the guide
#   /etc/systemd/system/{fetcher.service,fetcher-metrics.socket,gateway.service}
#   /etc/systemd/system/fetcher.service.d/resolvers.conf   from /etc/resolv.conf, rewritten
#   /etc/sysusers.d/tigress.conf and the group fetcher-clients
#   /etc/tigress/tigress.toml, /etc/tigress/gateway.env    examples, never overwritten
set -eu

SRC=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=/opt/tigress
VENV=$PREFIX/venv
UNITS=/etc/systemd/system
DROPIN=$UNITS/fetcher.service.d
SYSUSERS=/etc/sysusers.d/tigress.conf
CONF=/etc/tigress
PYTHON=${PYTHON:-/usr/bin/python3}
WHEELHOUSE=${WHEELHOUSE:-}
SERVICES="fetcher-metrics.socket fetcher.service gateway.service"

say() { printf 'tigress: %s\n' "$*"; }
die() { printf 'tigress: %s\n' "$*" >&2; exit 1; }

# True when systemd is the running init (sd_booted(3)): units can be started.
booted() { [ -d /run/systemd/system ]; }

make_venv() {
    case $PYTHON in
        /root/* | /home/* | /run/user/*)
            die "PYTHON=$PYTHON lies under a directory ProtectHome=yes hides from the services; use /usr/bin/python3" ;;
    esac
    [ -x "$PYTHON" ] || die "no Python at $PYTHON (install python3, or set PYTHON=)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "$PYTHON is older than 3.11"
    if [ -x "$VENV/bin/python" ]; then
        return
    fi
    mkdir -p "$PREFIX"
    if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
        rm -rf "$VENV"
        command -v apt-get >/dev/null ||
            die "$PYTHON -m venv failed: install the venv module (Debian: python3-venv)"
        say "$PYTHON -m venv failed; installing Debian's python3-venv"
        apt-get install -y -q python3-venv || die "apt-get install python3-venv failed"
        "$PYTHON" -m venv "$VENV"
    fi
}

install_program() {
    # The source is built by pip in a copy: a read-only checkout works, and no build/
    # or *.egg-info is left in it.
    build=$(mktemp -d)
    trap 'rm -rf "$build"' EXIT
    tar -C "$SRC" -cf - --exclude=.venv --exclude=.git --exclude=wheelhouse \
        --exclude=run --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
        --exclude=.mypy_cache --exclude=.pytest_cache --exclude=.ruff_cache . |
        tar -C "$build" -xf -
    if [ -n "$WHEELHOUSE" ]; then
        [ -d "$WHEELHOUSE" ] || die "WHEELHOUSE=$WHEELHOUSE is not a directory"
        wheels=$(cd "$WHEELHOUSE" && pwd)
        say "installing into $VENV offline from $wheels"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-index \
            --find-links "$wheels" "$build"
    else
        say "installing into $VENV (dependencies from the package index)"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$build"
    fi
    rm -rf "$build"
    trap - EXIT
    install -m 0644 "$SRC/deploy/systemd/README.md" "$PREFIX/README.md"
}

install_system_files() {
    install -d -m 0755 /etc/sysusers.d "$DROPIN"
    install -m 0644 "$SRC/deploy/systemd/tigress.sysusers.conf" "$SYSUSERS"
    systemd-sysusers "$SYSUSERS"
    for unit in $SERVICES; do
        install -m 0644 "$SRC/deploy/systemd/$unit" "$UNITS/$unit"
    done
    "$PYTHON" "$SRC/deploy/resolvers.py" /etc/resolv.conf >"$DROPIN/resolvers.conf.new"
    chmod 0644 "$DROPIN/resolvers.conf.new"
    mv "$DROPIN/resolvers.conf.new" "$DROPIN/resolvers.conf"
    install -d -m 0755 "$CONF"
    # Examples only: an operator's edited file is never replaced.
    [ -e "$CONF/tigress.toml" ] || install -m 0644 "$SRC/deploy/etc/tigress.toml" "$CONF/"
    [ -e "$CONF/gateway.env" ] || install -m 0600 "$SRC/deploy/etc/gateway.env" "$CONF/"
}

start_services() {
    systemctl enable -q $SERVICES
    if ! booted; then
        say "systemd is not running here: units enabled, not started"
        return
    fi
    systemctl daemon-reload
    systemctl start fetcher-metrics.socket
    # restart also starts a stopped unit, and makes a running one use the new program.
    systemctl restart fetcher.service gateway.service
    say "running: $(systemctl is-active fetcher.service) fetcher, $(systemctl is-active gateway.service) gateway"
}

uninstall() {
    if booted; then
        systemctl disable -q --now $SERVICES 2>/dev/null || true
    else
        systemctl disable -q $SERVICES 2>/dev/null || true
    fi
    for unit in $SERVICES; do
        rm -f "$UNITS/$unit"
    done
    rm -f "$DROPIN/resolvers.conf"
    rmdir "$DROPIN" 2>/dev/null || say "kept $DROPIN: it holds drop-ins of your own"
    if booted; then
        systemctl daemon-reload
        systemctl reset-failed $SERVICES 2>/dev/null || true
    fi
    rm -f "$SYSUSERS"
    if getent group fetcher-clients >/dev/null; then
        groupdel fetcher-clients
    fi
    rm -rf "$VENV" "$PREFIX/README.md"
    rmdir "$PREFIX" 2>/dev/null || true
    rm -rf "$CONF"
    say "removed (the journal keeps the services' past logs)"
}

[ "$(id -u)" = 0 ] || die "run as root"
case ${1:-} in
    install)
        command -v systemctl >/dev/null || die "systemd is needed (systemctl not found)"
        make_venv
        install_program
        install_system_files
        start_services
        ;;
    uninstall) uninstall ;;
    *) die "usage: $0 install|uninstall" ;;
esac
