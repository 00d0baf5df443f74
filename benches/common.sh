# common.sh: what the load scripts of benches/ share (sourced, not run): messages, free
# loopback ports, process stops and logs, CPU counters, and wrk's output. Each script sets
# BENCH (its name, for messages) before sourcing it; the port helpers read USED_PORTS, PORT_LO
# and PORT_HI, which each script sets.
# shellcheck shell=bash

# busy_pct FILE_BEFORE FILE_AFTER: prints "a/b/..." busy percent of each CPU between the snapshots.
busy_pct() {
    awk 'NR == FNR { t[$1] = $2; i[$1] = $3; next }
         { dt = $2 - t[$1]; di = $3 - i[$1]
           s = s (s == "" ? "" : "/") (dt > 0 ? sprintf("%.0f", 100 * (1 - di / dt)) : "?") }
         END { print s }' "$1" "$2"
}

# Per-CPU jiffies: prints "cpuN total idle" lines from /proc/stat (idle includes iowait).
cpu_snapshot() { awk '/^cpu[0-9]+ / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $1, t, $5 + $6 }' /proc/stat; }

cpu_ticks() { proc_ticks all "$@"; }

# user_ticks PID...: as cpu_ticks, user time only (so that user / total is the share of the CPU
# spent outside the kernel).
user_ticks() { proc_ticks user "$@"; }

proc_ticks() { # proc_ticks all|user PID...
    local which="$1" pid total=0 stat rest
    local -a f
    shift
    for pid in "$@"; do
        stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
        rest="${stat##*) }" # drop "pid (comm) ", comm may hold spaces
        read -r -a f <<<"$rest"
        total=$((total + f[11]))
        [ "$which" = user ] || total=$((total + f[12]))
    done
    echo "$total"
}

free_port() { # prints an unused loopback TCP port
    local port i
    for ((i = 0; i < 200; i++)); do
        port=$((PORT_LO + RANDOM % (PORT_HI - PORT_LO + 1)))
        if ! port_busy "$port"; then
            USED_PORTS+="$port "
            echo "$port"
            return 0
        fi
    done
    die "no free port found"
}

# parse_wrk FILE: prints "rps p50_us p99_us requests non2xx socket_errors" (latencies in microseconds).
parse_wrk() {
    awk '
        function us(v,   n, u) {
            n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
            if (u == "us") return n
            if (u == "ms") return n * 1000
            if (u == "s")  return n * 1000000
            if (u == "m")  return n * 60000000
            if (u == "h")  return n * 3600000000
            return -1
        }
        /^Requests\/sec:/               { rps = $2 }
        /requests in/                   { reqs = $1 }
        /Latency Distribution/          { dist = 1; next }
        dist && $1 == "50%"             { p50 = us($2) }
        dist && $1 == "99%"             { p99 = us($2) }
        /Non-2xx or 3xx responses:/     { non2xx += $NF }
        /Socket errors:/                { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) sock += $i + 0 }
        END {
            if (rps == "") rps = 0
            if (reqs == "") reqs = 0
            if (p50 == "") p50 = -1
            if (p99 == "") p99 = -1
            printf "%s %s %s %s %d %d\n", rps, p50, p99, reqs, non2xx, sock
        }
    ' "$1"
}

port_busy() {
    local port="$1"
    case "$USED_PORTS" in *" $port "*) return 0 ;; esac
    if command -v ss >/dev/null 2>&1; then
        ss -Htan 2>/dev/null | awk '{print $4}' | grep -Eq "[:.]$port\$"
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}

# wait_ready NAME PORT PID LOG...: until http://127.0.0.1:PORT/ answers 200 "hello", or fail
# (showing the end of each LOG).
show_logs() {
    local log
    for log in "$@"; do
        [ -s "$log" ] || continue
        say "last lines of $log:"
        tail -n 20 "$log" >&2 || true
    done
}

stop_pid() { # stop_pid PID NAME: TERM, wait up to 5 s, then KILL
    local pid="$1" name="$2" i
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$name (pid $pid) ignored SIGTERM for 5 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

say() { echo "$BENCH: $*" >&2; }

die() {
    echo "$BENCH: error: $*" >&2
    exit 1
}
