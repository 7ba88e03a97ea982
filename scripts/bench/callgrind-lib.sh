# Sourced by the callgrind scripts (hyper-callgrind.sh, rpc-callgrind.sh, kv-callgrind.sh):
# one server under callgrind, counted over a window of load.
#
#   callgrind_window CG LOG PORT WARM_S SECS WARM_JSON JSON SERVER_CMD...
#
# Starts SERVER_CMD under `valgrind --tool=callgrind` (dump file CG, output LOG, extra
# valgrind options from the array CG_OPTS), waits until PORT accepts a connection, runs the
# caller's load command (the array `load`, given --duration and --json here) for WARM_S
# seconds, zeroes the counters, runs it SECS seconds with no warm-up of its own, dumps the
# counters (to CG.1) and stops the server. Prints the replies the window received.
callgrind_window() {
    local cg=$1 log=$2 port=$3 warm=$4 secs=$5 warm_json=$6 json=$7
    shift 7
    rm -f "$cg" "$cg".*
    valgrind --tool=callgrind "${CG_OPTS[@]}" --callgrind-out-file="$cg" "$@" > "$log" 2>&1 &
    local vpid=$! up=0
    for _ in $(seq 150); do
        sleep 0.2
        if (echo > /dev/tcp/127.0.0.1/"$port") 2>/dev/null; then up=1; break; fi
    done
    if [ $up != 1 ]; then
        echo "$1 under callgrind did not start; see $log" >&2
        kill $vpid 2>/dev/null
        return 1
    fi
    "${load[@]}" --duration "$warm" --json "$warm_json" > /dev/null 2>&1 || true
    callgrind_control -z $vpid > /dev/null 2>&1
    "${load[@]}" --duration "$secs" --warmup 0 --json "$json" > /dev/null 2>&1 || true
    callgrind_control -d $vpid > /dev/null 2>&1
    kill $vpid 2>/dev/null
    wait $vpid 2>/dev/null || true
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['received'])" "$json"
}

# A free TCP port on the loopback.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
