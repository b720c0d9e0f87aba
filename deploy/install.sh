#!/bin/sh
# Installs Tigress as two systemd services, or removes it (deploy/systemd/README.md).
#
#   deploy/install.sh install      (what `make install` runs; run it again to upgrade:
#                                   services restart only when something changed)
#   deploy/install.sh uninstall    (what `make uninstall` runs)
#
# Needs root, systemd, and a Python 3.11+ with its venv module (Debian: python3-venv).
# Variables:
#   PURGE=1          uninstall: also remove /etc/tigress (the settings and the keys),
#                    which uninstall otherwise keeps
#   WHEELHOUSE=DIR   install offline: pip --no-index --find-links=DIR (`make wheelhouse`
#                    builds DIR on a connected machine with the same Python and arch)
#   PYTHON=PATH      the interpreter of the service venv (default /usr/bin/python3); not
#                    under /root or /home, which the units' ProtectHome=yes hides
#
# What it writes, and nothing else (uninstall removes exactly this, /etc/tigress only
# with PURGE=1):
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
PURGE=${PURGE:-}
SERVICES="fetcher-metrics.socket fetcher.service gateway.service"
CHANGED=no

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
    if "$VENV/bin/python" -c '' 2>/dev/null; then
        return
    fi
    # Absent, or made by a Python that is gone (a distribution upgrade): start afresh.
    rm -rf "$VENV"
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

# Installs $1 as $2 with mode $3 unless $2 already has that content; notes a change.
put() {
    if ! cmp -s "$1" "$2"; then
        install -m "$3" "$1" "$2"
        CHANGED=yes
    fi
}

install_program() {
    # pip builds from a copy of what the wheel holds: a read-only checkout works, no
    # build/ or *.egg-info is left in it, and only a change to the program reinstalls it.
    build=$(mktemp -d)
    trap 'rm -rf "$build"' EXIT
    tar -C "$SRC" -cf - --exclude=__pycache__ pyproject.toml README.md fetcher gateway |
        tar -C "$build" -xf -
    # The same source twice is installed once: a second run changes nothing.
    source_id=$(cd "$build" && find . -type f -print0 | LC_ALL=C sort -z |
        xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$VENV/.tigress-source" 2>/dev/null)" = "$source_id" ]; then
        say "program unchanged in $VENV"
    elif [ -n "$WHEELHOUSE" ]; then
        [ -d "$WHEELHOUSE" ] || die "WHEELHOUSE=$WHEELHOUSE is not a directory"
        wheels=$(cd "$WHEELHOUSE" && pwd)
        say "installing into $VENV offline from $wheels"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-index \
            --find-links "$wheels" "$build"
        echo "$source_id" >"$VENV/.tigress-source"
        CHANGED=yes
    else
        say "installing into $VENV (dependencies from the package index)"
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$build"
        echo "$source_id" >"$VENV/.tigress-source"
        CHANGED=yes
    fi
    rm -rf "$build"
    trap - EXIT
    # The guide the units' Documentation= names (not a reason to restart anything).
    install -m 0644 "$SRC/deploy/systemd/README.md" "$PREFIX/README.md"
}

install_system_files() {
    install -d -m 0755 /etc/sysusers.d "$DROPIN"
    put "$SRC/deploy/systemd/tigress.sysusers.conf" "$SYSUSERS" 0644
    systemd-sysusers "$SYSUSERS"
    for unit in $SERVICES; do
        put "$SRC/deploy/systemd/$unit" "$UNITS/$unit" 0644
    done
    "$PYTHON" "$SRC/deploy/resolvers.py" /etc/resolv.conf >"$DROPIN/resolvers.conf.new"
    put "$DROPIN/resolvers.conf.new" "$DROPIN/resolvers.conf" 0644
    rm -f "$DROPIN/resolvers.conf.new"
    install -d -m 0755 "$CONF"
    # Examples only: an operator's edited file is never replaced.
    if [ ! -e "$CONF/tigress.toml" ]; then
        install -m 0644 "$SRC/deploy/etc/tigress.toml" "$CONF/"
        CHANGED=yes
    fi
    if [ ! -e "$CONF/gateway.env" ]; then
        install -m 0600 "$SRC/deploy/etc/gateway.env" "$CONF/"
        CHANGED=yes
    fi
}

start_services() {
    systemctl enable -q $SERVICES
    if ! booted; then
        say "systemd is not running here: units enabled, not started"
        return
    fi
    if [ "$CHANGED" = yes ]; then
        systemctl daemon-reload
        systemctl start fetcher-metrics.socket
        # restart also starts a stopped unit, and makes a running one use what changed.
        systemctl restart fetcher.service gateway.service
    else
        systemctl start $SERVICES
        say "nothing changed: running services left as they were"
    fi
    say "fetcher $(systemctl is-active fetcher.service), gateway $(systemctl is-active gateway.service)"
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
    if [ -d "$DROPIN" ] && ! rmdir "$DROPIN" 2>/dev/null; then
        say "kept $DROPIN: it holds drop-ins of your own"
    fi
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
    if [ "$PURGE" = 1 ]; then
        rm -rf "$CONF"
        say "removed, $CONF included (the journal keeps the services' past logs)"
    else
        say "removed; kept $CONF (settings and keys): make uninstall PURGE=1 removes it too"
    fi
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
