#!/usr/bin/python3
"""edgertd's Prometheus endpoint (`metrics:` in the config), each case against a real edgertd
on the test-pattern source:

  unix_socket   GET /metrics on a Unix socket: every family, labelled; the counters are the
                numbers `edgertctl stats` and `status` show; histograms are well formed; swaps
                and rollbacks are counted; a client that sends nothing or half a request does
                not hold up other scrapes; other paths are 404, other methods 405
  loopback_tcp  the same endpoint on a loopback TCP port
  config        off by default (no socket, no port); a non-loopback address and malformed
                values are refused with the key, where it is and why

  metrics_test.py BUILD_DIR SOURCE_DIR CASE
"""
import http.client
import json
import math
import os
import re
import socket
import subprocess
import time

from daemon_case import Daemon, build_engine, check, ctl, demo_onnx, edgertctl, edgertd, flat_onnx, run_case, work

PIPELINE_FAMILIES = ["edgertd_pipeline_fps", "edgertd_frames_total", "edgertd_frames_processed_total",
                     "edgertd_frames_dropped_total", "edgertd_frame_errors_total", "edgertd_source_gaps_total",
                     "edgertd_stage_latency_seconds", "edgertd_engine_info", "edgertd_engine_swaps_total",
                     "edgertd_engine_rollbacks_total", "edgertd_engine_swaps_refused_total"]
MEMORY_FAMILIES = ["edgertd_memory_used_bytes", "edgertd_memory_reserved_bytes", "edgertd_memory_budget_bytes"]
STAGES = ["queue", "preprocess", "inference", "postprocess", "total"]
# Counters of a scrape and the `edgertctl stats` fields that must hold the same number.
COUNTERS = {"edgertd_frames_total": "frames_in", "edgertd_frames_processed_total": "processed",
            "edgertd_frames_dropped_total": "dropped", "edgertd_frame_errors_total": "errors",
            "edgertd_source_gaps_total": "source_gaps", "edgertd_engine_swaps_total": "swaps",
            "edgertd_engine_rollbacks_total": "rollbacks", "edgertd_engine_swaps_refused_total": "swaps_refused"}


def write_config(engine, top="", fps=10, control="control.sock", state="state"):
    path = f"{work}/edgertd{len(os.listdir(work))}.yaml"
    with open(path, "w") as f:
        f.write(f"""board: x86_64-generic
control_socket: {work}/{control}
state_dir: {work}/{state}
{top}pipelines:
  - name: cam
    source: {{type: test-pattern, width: 64, height: 64, fps: {fps}, format: nv12}}
    engine: {engine}
    postprocess: {{type: classification, top_k: 2}}
""")
    return path


def flat_engine():
    """An engine whose input is a vector, not an image: a swap to it is refused at its trial frame."""
    return build_engine(flat_onnx(), "flat")


def ctl_json(*args):
    res = subprocess.run([edgertctl, "--socket", f"{work}/control.sock", "--json", *args],
                         capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise RuntimeError(f"edgertctl {' '.join(args)}: {res.stderr}")
    return json.loads(res.stdout)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=5):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def http_request(endpoint, method="GET", path="/metrics", timeout=5):
    """(status, headers, body) of one request; `endpoint` is a socket path or (host, port)."""
    if isinstance(endpoint, str):
        connection = UnixHTTPConnection(endpoint, timeout)
    else:
        connection = http.client.HTTPConnection(endpoint[0], endpoint[1], timeout=timeout)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_exposition(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}} of the text format 0.0.4;
    a line that is not a comment or a well-formed sample of a declared family is an error, and
    so are a family's samples split apart."""
    families, current, seen = {}, None, []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, kind, name, rest = line.split(" ", 3)
            family = families.setdefault(name, {"type": None, "help": None, "samples": []})
            family["type" if kind == "TYPE" else "help"] = rest
            current = name
            continue
        match = SAMPLE.match(line)
        if not match:
            raise ValueError(f"not a sample line: {line!r}")
        name, labels_text, value = match.groups()
        labels = {}
        if labels_text:
            pos = 0
            while pos < len(labels_text):
                label = LABEL.match(labels_text, pos)
                if not label:
                    raise ValueError(f"bad labels in {line!r}")
                labels[label.group(1)] = label.group(2)
                pos = label.end()
        family = name if name in families else re.sub(r"_(bucket|sum|count)$", "", name)
        if family != current or family not in families:
            raise ValueError(f"sample {name} outside its family's block (family {current})")
        if seen and seen[-1] != family and family in seen:
            raise ValueError(f"family {family} split apart")
        seen.append(family)
        families[family]["samples"].append((name, labels, float(value.replace("+Inf", "inf"))))
    return families


def sample(families, family, name=None, **labels):
    """The value of the one sample of `family` named `name` (default: the family) with `labels`."""
    found = [v for n, l, v in families.get(family, {"samples": []})["samples"]
             if n == (name or family) and all(l.get(k) == v for k, v in labels.items())]
    if len(found) != 1:
        raise KeyError(f"{name or family}{labels}: {len(found)} samples")
    return found[0]


def check_format(families, engine_sha):
    """Every family present, typed, helped and labelled; histograms cumulative and consistent."""
    for family in PIPELINE_FAMILIES + MEMORY_FAMILIES:
        check(f"{family} is present with HELP and TYPE", family in families and families[family]["help"] and
              families[family]["type"], str(families.get(family)))
    for family in PIPELINE_FAMILIES:
        samples = families.get(family, {"samples": []})["samples"]
        check(f"{family} has samples, all labelled pipeline=\"cam\"", samples and
              all(labels.get("pipeline") == "cam" for _, labels, _ in samples), str(samples[:3]))
    for name, family in families.items():
        if name.endswith("_total"):
            check(f"{name} is a counter", family["type"] == "counter", family["type"])
        check(f"{name} is prefixed edgertd_", name.startswith("edgertd_"))
    check("the latency histogram is typed histogram", families["edgertd_stage_latency_seconds"]["type"] == "histogram")
    for family in MEMORY_FAMILIES:
        check(f"{family} is a gauge", families[family]["type"] == "gauge")
    check("edgertd_engine_info is 1 for the running engine's id", sample(families, "edgertd_engine_info", pipeline="cam",
                                                                       engine=engine_sha) == 1,
          str(families["edgertd_engine_info"]["samples"]))
    histogram = families["edgertd_stage_latency_seconds"]["samples"]
    for stage in STAGES:
        buckets = [(labels["le"], v) for n, labels, v in histogram
                   if n.endswith("_bucket") and labels.get("stage") == stage and labels.get("pipeline") == "cam"]
        bounds = [float(le.replace("+Inf", "inf")) for le, _ in buckets]
        counts = [v for _, v in buckets]
        count = sample(families, "edgertd_stage_latency_seconds", "edgertd_stage_latency_seconds_count",
                       pipeline="cam", stage=stage)
        total = sample(families, "edgertd_stage_latency_seconds", "edgertd_stage_latency_seconds_sum",
                       pipeline="cam", stage=stage)
        check(f"{stage}: buckets rise to le=\"+Inf\"", len(buckets) > 2 and buckets[-1][0] == "+Inf" and
              bounds == sorted(bounds) and len(set(bounds)) == len(bounds), str(buckets))
        check(f"{stage}: bucket counts are cumulative", counts == sorted(counts), str(counts))
        check(f"{stage}: _count equals the +Inf bucket and frames were measured", count == counts[-1] > 0,
              f"count {count}, buckets {counts}")
        check(f"{stage}: _sum is seconds, positive and below count x the largest finite bound",
              0 < total <= count * 3600, f"sum {total}, count {count}")
    total_buckets = [v for n, labels, v in histogram if n.endswith("_bucket") and labels.get("stage") == "total"]
    check("total latency: some frames under the last finite bound (the buckets count, not just +Inf)",
          total_buckets[-2] > 0, str(total_buckets))


def stats_numbers(stats):
    numbers = {metric: stats[field] for metric, field in COUNTERS.items()}
    numbers["edgertd_stage_latency_seconds_count"] = stats["latency"]["total"]["count"]
    return numbers


def scrape_numbers(families):
    numbers = {metric: sample(families, metric, pipeline="cam") for metric in COUNTERS}
    numbers["edgertd_stage_latency_seconds_count"] = sample(
        families, "edgertd_stage_latency_seconds", "edgertd_stage_latency_seconds_count", pipeline="cam", stage="total")
    return numbers


def check_same_numbers_as_stats(endpoint):
    """A scrape read between two `edgertctl stats` that agree (no frame came meanwhile: the
    source runs at 10 fps) holds exactly their numbers; should frames never pause, the scrape
    must at least lie between them."""
    for attempt in range(30):
        before = ctl_json("stats", "cam")[0]
        status_before = ctl_json("status")
        families = parse_exposition(http_request(endpoint)[2])
        after = ctl_json("stats", "cam")[0]
        if stats_numbers(before) == stats_numbers(after) and before["fps"] == after["fps"]:
            break
    scraped, low, high = scrape_numbers(families), stats_numbers(before), stats_numbers(after)
    if low == high:
        check(f"counters equal edgertctl stats (attempt {attempt + 1})", scraped == low, f"scrape {scraped}, stats {low}")
        fps = sample(families, "edgertd_pipeline_fps", pipeline="cam")
        check("fps equals edgertctl stats", math.isclose(fps, before["fps"], rel_tol=1e-6), f"{fps} vs {before['fps']}")
    else:
        check("counters lie between two edgertctl stats (frames never paused)",
              all(low[k] <= scraped[k] <= high[k] for k in low), f"scrape {scraped}, before {low}, after {high}")
    memory = status_before["memory"]
    check("memory budget equals edgertctl status", sample(families, "edgertd_memory_budget_bytes") == memory["budget_bytes"] > 0,
          f"{sample(families, 'edgertd_memory_budget_bytes')} vs {memory}")
    check("reserved memory equals edgertctl status", sample(families, "edgertd_memory_reserved_bytes") == memory["reserved_bytes"] > 0,
          f"{sample(families, 'edgertd_memory_reserved_bytes')} vs {memory}")
    check("used memory is the reservations plus socket buffers",
          sample(families, "edgertd_memory_used_bytes") >= sample(families, "edgertd_memory_reserved_bytes"))
    return scraped


def wait_until(condition, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def check_endpoint(endpoint):
    """What both transports must do; returns the families of a scrape."""
    status, headers, body = http_request(endpoint)
    check("GET /metrics answers 200", status == 200, f"{status} {body[:200]}")
    check("the content type is the text format 0.0.4",
          headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"), str(headers))
    check("the connection is closed after the response", headers.get("Connection") == "close", str(headers))
    status, _, _ = http_request(endpoint, path="/")
    check("another path is 404", status == 404, str(status))
    status, headers, _ = http_request(endpoint, method="POST")
    check("POST /metrics is 405 with Allow: GET", status == 405 and headers.get("Allow") == "GET", f"{status} {headers}")
    status, _, _ = http_request(endpoint, path="/metrics?name[]=x")
    check("a query string is ignored", status == 200, str(status))
    return parse_exposition(body)


def connect_raw(endpoint):
    s = socket.socket(socket.AF_UNIX if isinstance(endpoint, str) else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(endpoint)
    return s


def check_stalled_clients(endpoint):
    """Clients that connect and send nothing, or half a request, hold up nobody."""
    silent = connect_raw(endpoint)
    half = connect_raw(endpoint)
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    started = time.time()
    answers = [http_request(endpoint, timeout=3)[0] for _ in range(5)]
    check("scrapes are answered while a silent and a half-sent client stay connected",
          answers == [200] * 5 and time.time() - started < 5, f"{answers} in {time.time() - started:.1f} s")
    check("control still answers meanwhile", ctl("status").returncode == 0)
    check("the silent client is still connected, unanswered", still_waiting(silent))
    check("the half-sent request is not answered before it ends", still_waiting(half))
    half.sendall(b"\r\n")
    reply = read_all(half)
    check("the half-sent request, completed, is answered", reply.startswith(b"HTTP/1.1 200 OK") and
          b"edgertd_frames_total" in reply, reply[:100])
    oversized = connect_raw(endpoint)
    oversized.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 20000)
    reply = read_all(oversized)
    check("a request beyond the size cap is refused (431) and closed", reply.startswith(b"HTTP/1.1 431"), reply[:100])
    for s in [silent, half, oversized]:
        s.close()


def still_waiting(s):
    """True when nothing comes back on `s` for 0.2 s: the daemon neither answered nor closed it."""
    s.settimeout(0.2)
    try:
        s.recv(1)
        return False
    except socket.timeout:
        return True
    finally:
        s.settimeout(5)


def listening_tcp_inodes(pid):
    """Socket inodes of `pid` that listen on a TCP port (/proc/net/tcp{,6} state 0A)."""
    links = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    inodes = {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(table):
            with open(table) as f:
                listening |= {fields[9] for fields in (line.split() for line in f.readlines()[1:]) if fields[3] == "0A"}
    return inodes & listening


def read_all(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def case_unix_socket():
    first = build_engine()
    second = build_engine(demo_onnx(), "demo2", "--no-self-test")
    endpoint = f"{work}/metrics.sock"
    daemon = Daemon(write_config(first, top=f"metrics:\n  socket: {endpoint}\n"))
    try:
        check("the log says where metrics are served", f"metrics: serving GET /metrics on unix:{endpoint}" in daemon.stderr(),
              daemon.stderr()[-500:])
        check("frames flow", wait_until(lambda: ctl_json("stats", "cam")[0]["processed"] >= 10))
        families = check_endpoint(endpoint)
        check_format(families, ctl_json("stats", "cam")[0]["engine"])
        check_stalled_clients(endpoint)

        # A deploy switches the engine (a swap), a rollback switches it back.
        res = ctl("deploy", second, "--pipeline", "cam")
        check("deploy the second engine", res.returncode == 0, res.stderr)
        second_sha = ctl_json("stats", "cam")[0]["engine"]
        families = parse_exposition(http_request(endpoint)[2])
        check("engine_info follows the deploy", sample(families, "edgertd_engine_info", pipeline="cam", engine=second_sha) == 1 and
              len(families["edgertd_engine_info"]["samples"]) == 1, str(families["edgertd_engine_info"]["samples"]))
        check("the deploy is counted as a swap", sample(families, "edgertd_engine_swaps_total", pipeline="cam") == 1)
        res = ctl("rollback", "cam")
        check("roll back", res.returncode == 0, res.stderr)
        res = ctl("deploy", flat_engine(), "--pipeline", "cam")
        check("a deploy of an engine that cannot take the frames is refused", res.returncode != 0 and
              "trial_frame" in res.stderr, res.stderr)

        # Unloaded, frames keep coming and are dropped: frames, processed and dropped differ.
        check("unload", ctl("unload", "cam").returncode == 0)
        check("frames are dropped while unloaded", wait_until(lambda: ctl_json("stats", "cam")[0]["dropped"] >= 3))
        scraped = check_same_numbers_as_stats(endpoint)
        check("the rollback and the refused deploy are counted", scraped["edgertd_engine_rollbacks_total"] == 1 and
              scraped["edgertd_engine_swaps_total"] == 1 and scraped["edgertd_engine_swaps_refused_total"] == 1, str(scraped))
        check("frames, processed and dropped are three different numbers here",
              len({scraped["edgertd_frames_total"], scraped["edgertd_frames_processed_total"],
                   scraped["edgertd_frames_dropped_total"]}) == 3, str(scraped))
        families = parse_exposition(http_request(endpoint)[2])
        check("engine_info is 0 with engine=\"\" while none is loaded",
              sample(families, "edgertd_engine_info", pipeline="cam", engine="") == 0)
    finally:
        check("edgertd stops with exit 0", daemon.stop() == 0, daemon.stderr()[-800:])
    check("the metrics socket is removed at stop", not os.path.exists(endpoint))


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def case_loopback_tcp():
    engine = build_engine()
    port = free_port()
    daemon = Daemon(write_config(engine, top=f"metrics:\n  listen: 127.0.0.1:{port}\n"))
    try:
        check("frames flow", wait_until(lambda: ctl_json("stats", "cam")[0]["processed"] >= 10))
        endpoint = ("127.0.0.1", port)
        families = check_endpoint(endpoint)
        check_format(families, ctl_json("stats", "cam")[0]["engine"])
        check_stalled_clients(endpoint)
        check_same_numbers_as_stats(endpoint)
        check("edgertd listens on one TCP port (the check the config case relies on)",
              len(listening_tcp_inodes(daemon.process.pid)) == 1, str(listening_tcp_inodes(daemon.process.pid)))
        blocked = subprocess.run([edgertd, "--config", write_config(engine, top=f"metrics:\n  listen: localhost:{port}\n",
                                                                             control="control2.sock", state="state2")],
                                 capture_output=True, text=True, timeout=30)
        check("a second daemon on the same port fails, naming it", blocked.returncode != 0 and
              f"cannot listen on localhost:{port}" in blocked.stderr, blocked.stderr[-500:])
    finally:
        check("edgertd stops with exit 0", daemon.stop() == 0, daemon.stderr()[-800:])
    if socket.has_ipv6:
        try:
            port = free_port(socket.AF_INET6, "::1")
        except OSError:
            return  # no IPv6 loopback here
        daemon = Daemon(write_config(engine, top=f"metrics:\n  listen: \"[::1]:{port}\"\n"))
        try:
            status, _, body = http_request(("::1", port))
            check("[::1]:PORT serves the metrics", status == 200 and "edgertd_frames_total{pipeline=\"cam\"}" in body,
                  f"{status} {body[:200]}")
        finally:
            check("edgertd stops with exit 0", daemon.stop() == 0, daemon.stderr()[-800:])


def case_config():
    engine = build_engine()
    daemon = Daemon(write_config(engine))
    try:
        sockets = {p for p in os.listdir(work) if p.endswith(".sock")}
        check("off by default: no socket besides the control socket", sockets == {"control.sock"}, str(sockets))
        check("off by default: edgertd listens on no TCP port", not listening_tcp_inodes(daemon.process.pid))
        check("off by default: the log names no metrics endpoint", "serving GET /metrics" not in daemon.stderr(),
              daemon.stderr()[-500:])
    finally:
        check("edgertd stops with exit 0", daemon.stop() == 0, daemon.stderr()[-800:])

    refused = [
        ("listen: 0.0.0.0:9464", "'0.0.0.0' is not a loopback address; edgertd serves metrics only on 127.0.0.1, ::1 or localhost"),
        ("listen: 192.168.1.20:9464", "'192.168.1.20' is not a loopback address"),
        ("listen: \"[::]:9464\"", "'::' is not a loopback address"),
        ("listen: example.com:9464", "'example.com' is not a loopback address"),
        ("listen: 127.0.0.1", "must be HOST:PORT"),
        ("listen: 127.0.0.1:0", "the port must be a number from 1 to 65535"),
        ("listen: 127.0.0.1:70000", "the port must be a number from 1 to 65535"),
        ("{}", "metrics needs exactly one of 'socket'"),
        (f"socket: {work}/m.sock\n  listen: 127.0.0.1:9464", "metrics needs exactly one of 'socket'"),
        (f"socket: {work}/control.sock", "metrics.socket '" + work + "/control.sock' is already used by control_socket"),
        ("port: 9464", "unknown key 'port'"),
    ]
    for value, message in refused:
        top = f"metrics:\n  {value}\n" if not value.startswith("{") else f"metrics: {value}\n"
        config = write_config(engine, top=top)
        res = subprocess.run([edgertd, "--config", config], capture_output=True, text=True, timeout=30)
        check(f"metrics {value!r} is refused (exit 78) with {message!r} and the file:line", res.returncode == 78 and
              message in res.stderr and f"{config}:" in res.stderr, res.stderr[-400:])
    config = write_config(engine, top="metrics:\n  listen: 0.0.0.0:9464\n")
    res = subprocess.run([edgertd, "--check", "--config", config], capture_output=True, text=True, timeout=30)
    check("--check refuses it too, at the line of the key", res.returncode != 0 and f"{config}:5:" in res.stderr, res.stderr)
    with open(f"{work}/file-in-the-way", "w") as f:
        f.write("data")
    config = write_config(engine, top=f"metrics:\n  socket: {work}/file-in-the-way\n")
    res = subprocess.run([edgertd, "--config", config], capture_output=True, text=True, timeout=30)
    check("a metrics socket path holding a file is refused, the file kept", res.returncode == 78 and
          "metrics.socket: socket path" in res.stderr and os.path.isfile(f"{work}/file-in-the-way"), res.stderr[-400:])


run_case({"unix_socket": case_unix_socket, "loopback_tcp": case_loopback_tcp, "config": case_config})
