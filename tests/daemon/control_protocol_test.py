#!/usr/bin/python3
"""edgertd's control protocol and engine options, each case against a real edgertd on the
test-pattern source:

  errors      too_large, bad_request and unknown_command answers, each in the protocol's words;
              the daemon goes on answering
  unload      `unload` stops a pipeline's results and is recorded; a swap back resumes them
  log_level   `log-level` reads and sets the level, and the level filters what is logged
  mlock       mlock_weights: true locks the engine's mapping in RAM (smaps Locked:) but its unread
              weights, false not
  journal     the journal sink logs every n-th result at info priority with its top class

  control_protocol_test.py BUILD_DIR SOURCE_DIR CASE
"""
import json
import os
import socket
import struct
import subprocess
import time

from daemon_case import Daemon, build_engine, check, edgert, edgertd, run_case, work


def write_config(engine, top="", sinks=None):
    sinks = sinks if sinks is not None else f"socket: {{path: {work}/results.sock}}"
    path = f"{work}/edgertd{len(os.listdir(work))}.yaml"
    with open(path, "w") as f:
        f.write(f"""board: x86_64-generic
control_socket: {work}/control.sock
state_dir: {work}/state
{top}pipelines:
  - name: cam
    source: {{type: test-pattern, width: 64, height: 64, fps: 30, format: nv12}}
    engine: {engine}
    postprocess: {{type: classification, top_k: 2}}
    sinks:
      {sinks}
""")
    return path


_pending = {}  # bytes read past the last response, per socket: pipelined answers arrive together


def read_response(s):
    data = _pending.pop(s.fileno(), b"")
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a full response (got {data!r})")
        data += chunk
    end = 4 + struct.unpack(">I", data[:4])[0]
    if len(data) > end:
        _pending[s.fileno()] = data[end:]
    return json.loads(data[4:end])


def send_raw(payload, timeout=10):
    """Sends one frame of raw bytes; returns the decoded response."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(f"{work}/control.sock")
        _pending.pop(s.fileno(), None)
        s.sendall(struct.pack(">I", len(payload)) + payload)
        return read_response(s)


def request(message, timeout=10):
    return send_raw(json.dumps(message).encode(), timeout)


def poll(condition, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


def results_within(seconds):
    """Result lines the results socket delivers to a new connection within `seconds`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(f"{work}/results.sock")
        s.settimeout(0.2)
        buffer, deadline = b"", time.time() + seconds
        while time.time() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            buffer += chunk
        return [json.loads(line) for line in buffer.split(b"\n") if line.strip()]


def error_of(response):
    return (response.get("error") or {}).get("code"), (response.get("error") or {}).get("message", "")


def case_errors():
    daemon = Daemon(write_config(build_engine()))
    try:
        # A length prefix beyond 64 KiB is refused before the body is read, and the connection closed.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(f"{work}/control.sock")
            _pending.pop(s.fileno(), None)
            s.sendall(struct.pack(">I", 64 * 1024 + 1) + b"{")
            response = read_response(s)
            code, message = error_of(response)
            check("a request over 64 KiB is too_large", not response["ok"] and code == "too_large" and
                  "65536 bytes" in message, json.dumps(response))
            closed = b""
            try:
                closed = s.recv(1)
            except ConnectionResetError:
                pass
            check("the connection of a too_large request is closed", closed == b"")
        # A request of exactly the limit is read and answered (here: not JSON, so bad_request).
        response = send_raw(b" " * (64 * 1024))
        check("a request of exactly 64 KiB is read", error_of(response)[0] == "bad_request", json.dumps(response))

        for payload, what in [(b"not json", "text that is not JSON"), (b"[1, 2]", "a JSON array"),
                              (b'{"pipeline": "cam"}', "an object without command"),
                              (b'{"command": 5}', "a numeric command"), (b"", "an empty request")]:
            response = send_raw(payload)
            code, message = error_of(response)
            check(f"{what} is a bad_request", not response["ok"] and code == "bad_request" and
                  message == 'a request is a JSON object with a string "command"', json.dumps(response))

        response = request({"command": "reboot-now"})
        code, message = error_of(response)
        check("an unknown command is unknown_command naming it and listing the commands",
              not response["ok"] and code == "unknown_command" and "'reboot-now'" in message and
              "status" in message and "log-level" in message, json.dumps(response))

        # After every refusal, on one connection, the next request is still answered.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(f"{work}/control.sock")
            _pending.pop(s.fileno(), None)
            for payload in (b"nope", b'{"command": "nope"}', b'{"command": "status"}'):
                s.sendall(struct.pack(">I", len(payload)) + payload)
            answers = [read_response(s) for _ in range(3)]
            check("one connection gets an answer to each request, in order",
                  [error_of(a)[0] for a in answers[:2]] == ["bad_request", "unknown_command"] and answers[2]["ok"],
                  json.dumps(answers)[:500])
        check("the daemon is still running", daemon.process.poll() is None)
    finally:
        daemon.stop()


def case_unload():
    daemon = Daemon(write_config(build_engine()))
    try:
        check("results flow before the unload", len(results_within(1.5)) > 0)
        stats = request({"command": "stats", "pipeline": "cam"})["result"][0]
        sha = stats["engine"]
        response = request({"command": "unload", "pipeline": "cam"})
        check("unload answers with the engine it unloaded", response["ok"] and
              response["result"]["unloaded"] == sha and response["result"]["pipeline"] == "cam", json.dumps(response))
        stats = request({"command": "stats", "pipeline": "cam"})["result"][0]
        check("stats shows no engine after the unload", not stats["engine"], json.dumps(stats)[:300])
        # Frames already past the engine may still be delivered; a second window must be empty.
        results_within(0.5)
        late = results_within(1.5)
        check("no results while unloaded", late == [], json.dumps(late)[:300])
        history = request({"command": "history", "pipeline": "cam"})
        check("the unload is in the pipeline's history", history["ok"] and
              any(h.get("state") == "unloaded" and h.get("sha256") == sha for h in history["result"]),
              json.dumps(history)[:500])
        response = request({"command": "unload", "pipeline": "nope"})
        check("unloading an unknown pipeline is no_such_pipeline", error_of(response)[0] == "no_such_pipeline",
              json.dumps(response))
        response = request({"command": "unload"})
        check("unload without a pipeline is refused", not response["ok"], json.dumps(response))
        response = request({"command": "swap", "pipeline": "cam", "sha256": sha}, timeout=60)
        check("a swap back to the engine is accepted", response["ok"], json.dumps(response))
        check("results flow again after the swap back", poll(lambda: len(results_within(1)) > 0, 10))
        check("the daemon is still running", daemon.process.poll() is None)
    finally:
        daemon.stop()


def case_log_level():
    daemon = Daemon(write_config(build_engine()))
    try:
        response = request({"command": "log-level"})
        check("log-level without a level reports the configured one (info)", response["ok"] and
              response["result"] == {"level": "info"}, json.dumps(response))
        for level in ("debug", "warning", "err", "notice"):
            response = request({"command": "log-level", "level": level})
            check(f"log-level {level} sets it", response["ok"] and response["result"] == {"level": level},
                  json.dumps(response))
            check(f"log-level then reports {level}", request({"command": "log-level"})["result"] == {"level": level})
        response = request({"command": "log-level", "level": "loud"})
        code, message = error_of(response)
        check("an unknown level is a bad_request listing the levels", code == "bad_request" and
              "debug, info, notice, warning, err" in message, json.dumps(response))
        check("the level is unchanged by a refused request", request({"command": "log-level"})["result"] == {"level": "notice"})

        # The level filters: at err an unload's notice is not logged, at notice it is.
        request({"command": "log-level", "level": "err"})
        request({"command": "unload", "pipeline": "cam"})
        quiet = daemon.stderr()
        check("at level err a notice is not logged", "unloaded; frames are dropped" not in quiet, quiet[-500:])
        request({"command": "log-level", "level": "notice"})
        request({"command": "unload", "pipeline": "cam"})
        check("at level notice it is, with its priority", poll(lambda: "<5>pipeline cam: engine" in daemon.stderr(), 5),
              daemon.stderr()[-500:])
    finally:
        daemon.stop()


def engine_mapping_locked_kb(pid):
    """Locked: of the engine's mappings in /proc/PID/smaps (edgertd runs engines from its store,
    state_dir/engines/SHA.engine), and whether any was found."""
    locked, found, current = 0, False, False
    store = os.path.realpath(f"{work}/state/engines") + "/"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                current = len(fields) >= 6 and fields[5].startswith(store) and fields[5].endswith(".engine")
                found = found or current
            elif current and fields and fields[0] == "Locked:":
                locked += int(fields[1])
    return locked, found


def case_mlock():
    engine = build_engine()
    size_kb = os.path.getsize(engine) // 1024
    # Original weights no kernel reads (their prepared copies serve) lie at the file's end and are
    # left unlocked: locking would fault them in.
    inspected = json.loads(subprocess.run([edgert, "inspect", "--json", engine], check=True, capture_output=True,
                                          text=True).stdout)
    unread_kb = inspected["totals"]["unread_weight_bytes"] // 1024
    for lock in (False, True):
        daemon = Daemon(write_config(engine, top=f"mlock_weights: {'true' if lock else 'false'}\n"))
        try:
            locked, found = engine_mapping_locked_kb(daemon.process.pid)
            check(f"mlock_weights {lock}: the engine file is mapped", found)
            if lock and (os.environ.get("EDGERT_ASAN_BUILD") or os.environ.get("EDGERT_TSAN_BUILD")):
                # AddressSanitizer and ThreadSanitizer make mlock a no-op (it would pin shadow
                # memory too): the main build checks the lock; here the same start-up runs under
                # the sanitizer's eye.
                print("     mlock not measured under a sanitizer (its mlock does nothing)")
            elif lock:
                # Whole pages: up to a page each way of the read part's end.
                want = size_kb - unread_kb - 4
                check("mlock_weights true: the engine mapping but its unread weights is locked",
                      locked >= max(want, 1) and locked <= size_kb - unread_kb + 4,
                      f"{locked} kB locked of a {size_kb} kB engine with {unread_kb} kB unread")
            else:
                check("mlock_weights false: nothing of it is locked", locked == 0, f"{locked} kB locked")
            check("results flow", len(results_within(1.5)) > 0)
        finally:
            daemon.stop()


def case_journal():
    every = 3
    daemon = Daemon(write_config(build_engine(), sinks=f"journal: {{every_n: {every}}}"))
    try:
        def lines():
            return [l for l in daemon.stderr().splitlines() if l.startswith("<6>pipeline cam frame ")]

        def processed():
            return request({"command": "stats", "pipeline": "cam"})["result"][0]["processed"]
        check("frames are processed", poll(lambda: processed() >= 4 * every, 30), daemon.stderr()[-500:])
        # Results 0, every, 2 every, ... are logged: ceil(processed / every) lines. Counted between
        # two reads of processed, with one line of slack each way for a result in flight.
        before = processed()
        logged = lines()
        after = processed()
        low, high = -(-before // every) - 1, -(-after // every) + 1
        check(f"every {every}th result is logged", low <= len(logged) <= high,
              f"{len(logged)} lines for {before}..{after} results, expected {low}..{high}")
        sequences = [int(l.split()[3].rstrip(":")) for l in logged]
        check("in frame order", sequences == sorted(sequences) and len(set(sequences)) == len(sequences), str(sequences))
        first = logged[0] if logged else ""
        check("each line is info priority and names the top class, its score and the latencies",
              "total " in first and "inference " in first and " ms" in first and "nothing" not in first, first)
    finally:
        daemon.stop()


cases = {"errors": case_errors, "unload": case_unload, "log_level": case_log_level, "mlock": case_mlock,
         "journal": case_journal}
run_case(cases)
