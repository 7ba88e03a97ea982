# The load gate of the measurement scripts (sourced by quiet-loop.sh and
# gated.sh): `load_gate` prints what it read and returns 0 when the 1-minute
# load is under LOAD_MAX (0.30) and the 5-minute under LOAD5_MAX (0.90).
LOAD_MAX=${LOAD_MAX:-0.30}
LOAD5_MAX=${LOAD5_MAX:-0.90}
load_gate() {
    local load1 load5
    read -r load1 load5 _ < /proc/loadavg
    if awk -v l="$load1" -v m="$LOAD_MAX" -v l5="$load5" -v m5="$LOAD5_MAX" \
        'BEGIN { exit !(l < m && l5 < m5) }'; then
        echo "load $load1 < $LOAD_MAX, 5-min $load5 < $LOAD5_MAX pass"
    else
        echo "load $load1 (< $LOAD_MAX?), 5-min $load5 (< $LOAD5_MAX?) FAIL"
        return 1
    fi
}
