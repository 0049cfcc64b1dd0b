#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A fake CRI runtime and the client checks for test_cri_proxy_transparency.sh.

  serve SOCKET EVENTS_FILE     a gRPC server on a unix socket with generic (bytes) handlers
  compare DIRECT PROXIED       every observation through the proxy equals the direct one
  unavailable PROXIED          the runtime is down: UNAVAILABLE, quickly
  recovers PROXIED SECS        calls work again (the proxy reconnects by itself)
  drain PROXIED PID            an in-flight call survives SIGTERM to PID; new calls are refused
  headers-first DIRECT PROXIED a client that waits for the runtime's headers before its first
                               message gets them (no deadlock), then a ping-pong works
  spaced DIRECT PROXIED        a stream's messages spaced in time each arrive promptly

Only Debian's python3-grpcio is used; messages are raw bytes (no protobuf needed:
the proxy must not care what the bytes are).
"""
import os
import queue
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

MiB = 1 << 20
# Spaced: the runtime sends its messages at these offsets (s) and ends the call at
# SPACED_END, so a message held back until the next one or until the status arrives
# at least SPACED_GAP late; a prompt one lags a few ms (bounded by SPACED_BOUND).
SPACED_AT = (0.0, 0.5, 1.0)
SPACED_END = 1.5
SPACED_GAP = 0.5
SPACED_BOUND = 0.25
OPTIONS = [("grpc.max_receive_message_length", 32 * MiB),
           ("grpc.max_send_message_length", 32 * MiB),
           ("grpc.enable_retries", 0)]


# ------------------------------------------------------------------ server

class FakeRuntime(grpc.GenericRpcHandler):
    def __init__(self, events):
        self.events = events
        self.lock = threading.Lock()

    def event(self, text):
        with self.lock, open(self.events, "a") as f:
            f.write(text + "\n")

    def service(self, details):
        m = details.method
        table = {
            "/test.Echo/Unary": grpc.unary_unary_rpc_method_handler(self.unary),
            "/runtime.v1.RuntimeService/Version": grpc.unary_unary_rpc_method_handler(self.unary),
            # CRI methods the CRI declares unary take pullgate-cri's unary relay (cri/unary.c),
            # not the byte pump: the same handlers under their names.
            "/runtime.v1.RuntimeService/ListContainers": grpc.unary_unary_rpc_method_handler(self.unary),
            "/runtime.v1alpha2.RuntimeService/Version": grpc.unary_unary_rpc_method_handler(self.unary),
            "/runtime.v1.RuntimeService/ContainerStatus": grpc.unary_unary_rpc_method_handler(self.fail),
            "/runtime.v1.ImageService/ListImages": grpc.unary_unary_rpc_method_handler(self.large),
            "/runtime.v1.RuntimeService/ExecSync": grpc.unary_unary_rpc_method_handler(self.sleep),
            # ImageStatus is verify.c's (criVerifyPulls); a request it cannot decode goes up as is.
            "/runtime.v1.ImageService/ImageStatus": grpc.unary_unary_rpc_method_handler(self.sleep),
            "/test.Echo/ServerStream": grpc.unary_stream_rpc_method_handler(self.server_stream),
            "/test.Echo/ClientStream": grpc.stream_unary_rpc_method_handler(self.client_stream),
            "/test.Echo/Bidi": grpc.stream_stream_rpc_method_handler(self.bidi),
            "/test.Echo/Fail": grpc.unary_unary_rpc_method_handler(self.fail),
            "/test.Echo/StreamThenFail": grpc.unary_stream_rpc_method_handler(self.stream_then_fail),
            "/test.Echo/Sleep": grpc.unary_unary_rpc_method_handler(self.sleep),
            "/test.Echo/Large": grpc.unary_unary_rpc_method_handler(self.large),
            "/test.Echo/HeadersFirst": grpc.stream_stream_rpc_method_handler(self.headers_first),
            "/test.Echo/Spaced": grpc.unary_stream_rpc_method_handler(self.spaced),
        }
        return table.get(m)  # None: UNIMPLEMENTED, like a runtime that lacks the method

    @staticmethod
    def echo_metadata(context):
        md = dict(context.invocation_metadata())
        context.send_initial_metadata((("x-echo-tenant", md.get("x-tenant", "")),
                                       ("x-echo-bin-bin", md.get("x-blob-bin", b""))))
        context.set_trailing_metadata((("x-trailer", "t1"), ("x-trailer-bin", b"\xff\x00\x01")))

    def unary(self, request, context):
        self.echo_metadata(context)
        return b"echo:" + request

    def server_stream(self, request, context):
        self.echo_metadata(context)
        for i in range(int(request)):
            yield (b"%d:" % i) + os.urandom(1) * (i * 300_000)

    def client_stream(self, requests, context):
        parts = list(requests)
        return b"%d|" % len(parts) + b"|".join(parts)

    def bidi(self, requests, context):
        for r in requests:
            yield r[::-1]

    def fail(self, request, context):
        context.set_trailing_metadata((("x-reason", "because"), ("x-detail-bin", b"\x00\x02")))
        context.abort(grpc.StatusCode.NOT_FOUND, "image \"%s\" not found: \u00fcber" % request.decode())

    def stream_then_fail(self, request, context):
        yield b"one"
        yield b"two"
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "stream broke")

    def sleep(self, request, context):
        seconds = float(request)
        self.event("sleep-start %s" % seconds)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not context.is_active():
                self.event("sleep-cancelled")
                return b""
            time.sleep(0.02)
        self.event("sleep-done")
        return b"slept"

    def large(self, request, context):
        return b"L" * int(request)

    def headers_first(self, requests, context):
        # The headers leave before any request is read: a client may wait for them.
        context.send_initial_metadata((("x-hello", "first"), ("x-hello-bin", b"\x00\xff")))
        for r in requests:
            yield b"pong:" + r

    def spaced(self, request, context):
        """Messages at SPACED_AT seconds, each carrying its send time; the end comes later."""
        t0 = time.monotonic()
        for i, at in enumerate(SPACED_AT):
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            yield b"%d@%.6f" % (i, time.monotonic())  # CLOCK_MONOTONIC: one clock machine-wide
        time.sleep(SPACED_END - SPACED_AT[-1])


def serve(sock, events):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=OPTIONS)
    server.add_generic_rpc_handlers((FakeRuntime(events),))
    server.add_insecure_port("unix:" + sock)
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(0)


# ------------------------------------------------------------------ client

def channel(sock):
    return grpc.insecure_channel("unix:" + sock, options=OPTIONS)


def xmd(md):
    """Application metadata only: the transport's own headers differ by hop."""
    return sorted((k, v) for k, v in (md or ()) if k.startswith("x-"))


def unary(ch, method, req, timeout=10, metadata=None):
    try:
        resp, call = ch.unary_unary(method).with_call(req, timeout=timeout, metadata=metadata)
        return ("OK", resp, xmd(call.initial_metadata()), xmd(call.trailing_metadata()))
    except grpc.RpcError as e:
        return (e.code().name, e.details(), xmd(e.initial_metadata()), xmd(e.trailing_metadata()))


def observe(sock):
    """Every observation of the suite against one endpoint, as comparable values."""
    ch = channel(sock)
    md = (("x-tenant", "team-a"), ("x-blob-bin", b"\x00\x01\xfe"))
    payload = bytes(range(256)) * 256 + b"\x00" * 10
    obs = {}
    obs["unary"] = unary(ch, "/test.Echo/Unary", payload, metadata=md)
    obs["empty"] = unary(ch, "/test.Echo/Unary", b"")
    obs["cri-version"] = unary(ch, "/runtime.v1.RuntimeService/Version", b"\x0a\x02v1")
    obs["error"] = unary(ch, "/test.Echo/Fail", b"busybox")
    obs["unknown"] = unary(ch, "/runtime.v1.RuntimeService/NoSuchMethod", b"x")[0]
    # The unary relay: metadata both ways, an empty request, v1alpha2, an error with trailers, size.
    obs["cri-unary"] = unary(ch, "/runtime.v1.RuntimeService/ListContainers", payload, metadata=md)
    obs["cri-empty"] = unary(ch, "/runtime.v1.RuntimeService/ListContainers", b"")
    obs["cri-v1alpha2"] = unary(ch, "/runtime.v1alpha2.RuntimeService/Version", b"\x0a\x02v1")
    obs["cri-error"] = unary(ch, "/runtime.v1.RuntimeService/ContainerStatus", b"busybox")
    obs["cri-large-15MiB"] = unary(ch, "/runtime.v1.ImageService/ListImages", b"%d" % (15 * MiB))[:2]
    obs["bounded:cri-large-17MiB"] = unary(ch, "/runtime.v1.ImageService/ListImages",
                                           b"%d" % (17 * MiB))[0]
    obs["large-15MiB"] = unary(ch, "/test.Echo/Large", b"%d" % (15 * MiB))[:2]
    # Over the proxy's 16 MiB bound (the kubelet's own default limit): not compared.
    obs["bounded:large-17MiB"] = unary(ch, "/test.Echo/Large", b"%d" % (17 * MiB))[0]
    it = ch.unary_stream("/test.Echo/ServerStream")(b"5", timeout=10, metadata=md)
    msgs = list(it)
    obs["server-stream"] = ([len(m) for m in msgs], [m[:2] for m in msgs], it.code().name,
                            xmd(it.initial_metadata()), xmd(it.trailing_metadata()))
    it = ch.unary_stream("/test.Echo/StreamThenFail")(b"", timeout=10)
    got = []
    try:
        for m in it:
            got.append(m)
    except grpc.RpcError as e:
        got.append((e.code().name, e.details()))
    obs["stream-then-fail"] = got
    obs["client-stream"] = ch.stream_unary("/test.Echo/ClientStream")(
        iter([b"a", b"bb", b"\x00ccc"]), timeout=10)
    obs["bidi"] = list(ch.stream_stream("/test.Echo/Bidi")(iter([b"abc", b"12345"]), timeout=10))
    ch.close()
    return obs


def check(ok, what):
    print(("ok   - " if ok else "FAIL - ") + what, flush=True)
    return 0 if ok else 1


def compare(direct, proxied):
    a, b = observe(direct), observe(proxied)
    fails = 0
    for key in (k for k in a if not k.startswith("bounded:")):
        fails += check(a[key] == b[key], "same %s through the proxy" % key)
        if a[key] != b[key]:
            print("       direct:  %.300r\n       proxied: %.300r" % (a[key], b[key]))
    # The observations are not vacuous: spot checks of what the fake sent.
    fails += check(a["unary"][0] == "OK" and a["unary"][1].startswith(b"echo:"), "echo works")
    fails += check(("x-echo-tenant", "team-a") in a["unary"][2], "metadata echoed")
    fails += check(a["error"][0] == "NOT_FOUND" and "\u00fcber" in a["error"][1], "error status")
    fails += check(("x-echo-tenant", "team-a") in a["cri-unary"][2] and
                   ("x-trailer-bin", b"\xff\x00\x01") in a["cri-unary"][3],
                   "CRI unary: metadata echoed, trailers")
    fails += check(a["cri-error"][0] == "NOT_FOUND" and ("x-reason", "because") in a["cri-error"][3],
                   "CRI unary: error status and trailers")
    fails += check(b["bounded:cri-large-17MiB"] == "RESOURCE_EXHAUSTED",
                   "CRI unary: 17 MiB refused by the proxy's bound (%s)" % b["bounded:cri-large-17MiB"])
    fails += check(a["unknown"] == "UNIMPLEMENTED", "unknown method is UNIMPLEMENTED")
    fails += check(a["bounded:large-17MiB"] == "OK", "17 MiB passes directly")
    fails += check(b["bounded:large-17MiB"] == "RESOURCE_EXHAUSTED",
                   "17 MiB refused by the proxy's bound (%s)" % b["bounded:large-17MiB"])
    fails += check(a["server-stream"][0] == [2, 300_002, 600_002, 900_002, 1_200_002],
                   "server stream sizes")
    fails += check(len(b["stream-then-fail"]) == 3, "messages then status on a stream")
    return fails


def deadline(proxied, events):
    """The byte pump's path (/test.Echo/Sleep), then the unary relay's (ExecSync)."""
    ch = channel(proxied)
    fails = 0
    for n, method in enumerate(("/test.Echo/Sleep", "/runtime.v1.RuntimeService/ExecSync"), 1):
        t0 = time.monotonic()
        r = unary(ch, method, b"3", timeout=0.5)
        took = time.monotonic() - t0
        fails += check(r[0] == "DEADLINE_EXCEEDED", "%s: deadline honoured (%s)" % (method, r[0]))
        fails += check(took < 2.0, "%s: deadline answered in %.2f s" % (method, took))
        # The runtime saw the call end too (deadline propagated upstream, not just locally).
        for _ in range(100):
            if open(events).read().count("sleep-cancelled") >= n:
                break
            time.sleep(0.05)
        fails += check(open(events).read().count("sleep-cancelled") >= n,
                       "%s: the runtime's call was ended" % method)
    # A client that gives up (no deadline) ends the runtime's call on both paths too.
    for n, method in enumerate(("/test.Echo/Sleep", "/runtime.v1.RuntimeService/ExecSync",
                                "/runtime.v1.ImageService/ImageStatus"), 3):
        started = open(events).read().count("sleep-start")
        fut = ch.unary_unary(method).future(b"5", timeout=20)
        for _ in range(100):  # cancel once the runtime is working on it
            if open(events).read().count("sleep-start") > started:
                break
            time.sleep(0.05)
        fut.cancel()
        for _ in range(100):
            if open(events).read().count("sleep-cancelled") >= n:
                break
            time.sleep(0.05)
        fails += check(open(events).read().count("sleep-cancelled") >= n,
                       "%s: a cancelled call ends the runtime's call" % method)
    return fails


def unavailable(proxied):
    ch = channel(proxied)
    t0 = time.monotonic()
    r = unary(ch, "/test.Echo/Unary", b"x", timeout=5)
    took = time.monotonic() - t0
    fails = check(r[0] == "UNAVAILABLE", "runtime down: %s" % r[0])
    fails += check(took < 4.0, "answered in %.2f s" % took)
    r = unary(ch, "/runtime.v1.RuntimeService/Version", b"x", timeout=5)
    fails += check(r[0] == "UNAVAILABLE", "runtime down, a CRI unary method: %s" % r[0])
    return fails


def recovers(proxied, secs):
    ch = channel(proxied)
    end = time.monotonic() + float(secs)
    r = None
    while time.monotonic() < end:
        r = unary(ch, "/test.Echo/Unary", b"again", timeout=2)
        if r[0] == "OK":
            break
        time.sleep(0.1)
    return check(r is not None and r[0] == "OK" and r[1] == b"echo:again",
                 "works again after the runtime restarted (%s)" % (r[0] if r else None))


def drain(proxied, pid):
    ch = channel(proxied)
    result = {}

    def slow():
        result["r"] = unary(ch, "/test.Echo/Sleep", b"1.5", timeout=10)

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)
    os.kill(int(pid), signal.SIGTERM)
    time.sleep(0.2)
    late = unary(channel(proxied), "/test.Echo/Unary", b"late", timeout=2)
    t.join()
    fails = check(result["r"][0] == "OK" and result["r"][1] == b"slept",
                  "in-flight call completed across SIGTERM (%s)" % (result["r"][0],))
    fails += check(late[0] == "UNAVAILABLE", "new call after SIGTERM refused (%s)" % late[0])
    return fails


def headers_first_run(sock):
    """Open the bidi call, wait (bounded) for the headers, then ping-pong 3 messages."""
    ch = channel(sock)
    requests = queue.Queue()
    call = ch.stream_stream("/test.Echo/HeadersFirst")(iter(requests.get, None), timeout=8)
    got = {}
    t0 = time.monotonic()
    waiter = threading.Thread(target=lambda: got.update(md=call.initial_metadata()), daemon=True)
    waiter.start()
    waiter.join(2.0)
    took = time.monotonic() - t0
    headers = xmd(got["md"]) if "md" in got else None
    pongs = []
    if headers is not None:
        try:
            for i in range(3):
                requests.put(b"ping%d" % i)
                pongs.append(next(call))
        except grpc.RpcError as e:
            pongs.append(e.code().name)
        except StopIteration:
            pongs.append("end of stream")
    requests.put(None)
    if headers is None:
        call.cancel()
    code = call.code().name
    ch.close()
    return headers, took, pongs, code


def headers_first(direct, proxied):
    a = headers_first_run(direct)
    b = headers_first_run(proxied)
    print("       direct:  headers after %.3f s, %r %s" % (a[1], a[2], a[3]))
    print("       proxied: headers after %.3f s, %r %s" % (b[1], b[2], b[3]))
    want = [("x-hello", "first"), ("x-hello-bin", b"\x00\xff")]
    fails = check(a[0] == want, "direct: headers before the first message (%r)" % (a[0],))
    fails += check(b[0] is not None, "proxied: headers before the first message within 2 s "
                   "(no deadlock; waited %.2f s)" % b[1])
    fails += check(b[0] == a[0], "proxied headers equal the direct ones (%r)" % (b[0],))
    expected = [b"pong:ping%d" % i for i in range(3)]
    fails += check(a[2] == expected and a[3] == "OK", "direct: ping-pong of 3 then OK")
    fails += check(b[2] == expected and b[3] == "OK",
                   "proxied: ping-pong of 3 then OK (%r %s)" % (b[2], b[3]))
    return fails


def spaced_run(sock):
    """[(index, lag)]: how long after the runtime sent each message the client had it."""
    ch = channel(sock)
    it = ch.unary_stream("/test.Echo/Spaced")(b"", timeout=10)
    lags = []
    try:
        for m in it:
            arrived = time.monotonic()
            index, sent = m.split(b"@")
            lags.append((int(index), arrived - float(sent)))
    except grpc.RpcError as e:
        lags.append((e.code().name, None))
    ch.close()
    return lags


def spaced(direct, proxied):
    a = spaced_run(direct)
    b = spaced_run(proxied)
    show = lambda lags: " ".join("#%s %s" % (i, "%.3fs" % l if l is not None else "-")
                                 for i, l in lags)
    print("       lag direct:  " + show(a))
    print("       lag proxied: " + show(b))
    n = len(SPACED_AT)
    fails = check([i for i, _ in a] == list(range(n)), "direct: %d spaced messages" % n)
    fails += check([i for i, _ in b] == list(range(n)), "proxied: %d spaced messages" % n)
    # The bound is what the proxy may add on a loaded machine, beyond the direct lag;
    # holding a message back costs at least SPACED_GAP (> SPACED_BOUND).
    for (i, la), (j, lb) in zip(a, b):
        if la is None or lb is None:
            continue
        fails += check(lb < la + SPACED_BOUND,
                       "proxied message #%d arrived %.3f s after it was sent (direct %.3f s,"
                       " bound +%.2f s)" % (i, lb, la, SPACED_BOUND))
    return fails


def main(argv):
    cmd = argv[1]
    if cmd == "serve":
        serve(argv[2], argv[3])
        return 0
    if cmd == "compare":
        return 1 if compare(argv[2], argv[3]) else 0
    if cmd == "deadline":
        return 1 if deadline(argv[2], argv[3]) else 0
    if cmd == "unavailable":
        return 1 if unavailable(argv[2]) else 0
    if cmd == "recovers":
        return 1 if recovers(argv[2], argv[3]) else 0
    if cmd == "drain":
        return 1 if drain(argv[2], argv[3]) else 0
    if cmd == "headers-first":
        return 1 if headers_first(argv[2], argv[3]) else 0
    if cmd == "spaced":
        return 1 if spaced(argv[2], argv[3]) else 0
    print("unknown command", cmd, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
