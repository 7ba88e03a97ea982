# skq-http: the real clients its tests drive (curl, Python's http.client,
# headless Chromium from 10-bench.sh), wrk (the independent closed-loop client
# the HTTP benchmark cross-checks one point with) and nginx, the peer (also
# installed by 10-bench.sh). Sourced by scripts/setup.sh, which defines apt_install.
apt_install curl wrk python3
