# skq bench: the peers it measures against (memcached, nginx), the headless
# browser its report test opens report.html in, and iproute2 (`ip netns`) for
# emulated RSS (the network namespace the sweep runs in). Sourced by
# scripts/setup.sh, which defines apt_install.
apt_install memcached chromium chromium-driver iproute2
# nginx-light is the small build; Debian releases without it ship plain nginx.
if apt-cache show nginx-light >/dev/null 2>&1; then
    apt_install nginx-light
else
    apt_install nginx
fi
# The harness starts its own instances on loopback ports; the distribution's
# services (started by the packages' postinst on some systems) are not needed.
for svc in memcached nginx; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
        systemctl stop "$svc" || true
    fi
done
