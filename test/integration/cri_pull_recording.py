#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A fake CRI image service and a kubelet stand-in for test_cri_pull_recording.sh and
test_cri_fail_closed.sh.

  serve SOCKET STATE_DIR EVENTS   fake runtime: PullImage (v1, v1alpha2), ImageStatus,
                                  ListImages, ListContainers
  pull SOCKET VERSION IMAGE NS ANNOTATION USER PASS AUTH
                                  one PullImage through pullgate-cri; prints
                                  "OK <image_ref>" or "<CODE> <details>"

The fake runtime answers by the image's name: "denied" -> UNKNOWN (401), nothing
stored; "flaky" -> the image is stored, then UNAVAILABLE; "stall" -> waits until the
file STATE_DIR/../release exists (at most 60 s); "slow" -> 3 s. ImageStatus of an image
it does not hold answers an empty response, as containerd and CRI-O do. ListImages
follows STATE_DIR/../list-mode: "empty" lists nothing, "fail" answers UNAVAILABLE;
Version answers STATE_DIR/../runtime-name and runtime-version (default fake-runtime 1.35.0);
STATE_DIR/../forget names images (one per line) it no longer holds.

Messages are encoded with Python classes generated at run time (grpc_tools.protoc)
from cri/cri_subset.proto, the proxy's own CRI subset (upstream field numbers).
The fake runtime notes whether the pull's intent was on disk when the pull
reached it: the proxy must write it before forwarding.
"""
import hashlib
import importlib
import os
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from grpc_tools import protoc

SOURCE_DIR = os.environ.get("PG_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "../..")


def load_proto():
    out = tempfile.mkdtemp(prefix="cri-pb-")
    proto_dir = os.path.join(SOURCE_DIR, "cri")
    rc = protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + out,
                      os.path.join(proto_dir, "cri_subset.proto")])
    if rc != 0:
        raise SystemExit("protoc failed")
    sys.path.insert(0, out)
    return importlib.import_module("cri_subset_pb2")


pb = load_proto()


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def image_id(image):
    return "sha256:" + sha("image:" + image.split(":")[0])


class FakeImageService(grpc.GenericRpcHandler):
    def __init__(self, state_dir, events):
        self.state_dir = state_dir
        self.events = events
        self.lock = threading.Lock()
        self.names = {}  # image ID -> repository, as a runtime's image store knows it

    def event(self, text):
        with self.lock, open(self.events, "a") as f:
            f.write(text + "\n")

    def service(self, details):
        m = details.method
        if m.endswith("ImageService/PullImage"):
            return grpc.unary_unary_rpc_method_handler(self.pull)
        if m.endswith("ImageService/ImageStatus"):
            return grpc.unary_unary_rpc_method_handler(self.status)
        if m.endswith("ImageService/ListImages"):
            return grpc.unary_unary_rpc_method_handler(self.list_images)
        if m.endswith("RuntimeService/ListContainers"):
            return grpc.unary_unary_rpc_method_handler(lambda raw, ctx: b"")
        if m.endswith("RuntimeService/Version"):
            return grpc.unary_unary_rpc_method_handler(self.version)
        return None

    def version(self, raw, context):
        # STATE_DIR/../runtime-name and runtime-version say which runtime this one plays.
        return pb.VersionResponse(
            version=b"0.1.0",
            runtime_name=(self.control("runtime-name").strip() or "fake-runtime").encode(),
            runtime_version=(self.control("runtime-version").strip() or "1.35.0").encode(),
            runtime_api_version=b"v1").SerializeToString()

    def control(self, name):
        path = os.path.join(os.path.dirname(self.state_dir), name)
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            return ""

    def list_images(self, raw, context):
        mode = self.control("list-mode").strip()
        self.event("list %s" % (mode or "normal"))
        if mode == "fail":
            context.abort(grpc.StatusCode.UNAVAILABLE, "runtime not ready")
        if mode == "empty":
            return b""
        forgotten = set(self.control("forget").split())
        images = [pb.Image(id=ref.encode(), repo_tags=[(name + ":1.0").encode()])
                  for ref, name in sorted(self.names.items()) if name + ":1.0" not in forgotten]
        return pb.ListImagesResponse(images=images).SerializeToString()

    def pull(self, raw, context):
        req = pb.PullImageRequest.FromString(raw)
        image = req.image.image.decode()
        intent = os.path.join(self.state_dir, "pulling", "sha256-" + sha(image))
        self.event("pull %s intent-%s" % (image, "present" if os.path.exists(intent) else "missing"))
        if "slow" in image:  # a pull in flight long enough to kill the proxy under it
            time.sleep(3)
        if "stall" in image:  # held until the test releases it
            release = os.path.join(os.path.dirname(self.state_dir), "release")
            for _ in range(600):
                if os.path.exists(release) or not context.is_active():
                    break
                time.sleep(0.1)
        if "denied" in image:
            context.abort(grpc.StatusCode.UNKNOWN,
                          "failed to pull and unpack image \"%s\": 401 Unauthorized" % image)
        with self.lock:
            self.names[image_id(image)] = image.rsplit(":", 1)[0]
        if "flaky" in image:  # stored, then the answer is lost
            context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset after the pull")
        return pb.PullImageResponse(image_ref=image_id(image).encode()).SerializeToString()

    def status(self, raw, context):
        req = pb.ImageStatusRequest.FromString(raw)
        ref = req.image.image.decode()
        self.event("status %s" % ref)
        name = self.names.get(ref)
        if not name and ":" in ref and not ref.startswith("sha256:"):
            name = ref.rsplit(":", 1)[0] if self.names.get(image_id(ref)) else None
            ref = image_id(ref) if name else ref
        if not name:
            return b""  # the CRI's "no such image": an empty answer, not an error
        img = pb.Image(id=ref.encode(), repo_tags=[(name + ":1.0").encode()],
                       repo_digests=[(name + "@sha256:" + sha(ref)).encode()])
        return pb.ImageStatusResponse(image=img).SerializeToString()


def serve(sock, state_dir, events):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=256))
    server.add_generic_rpc_handlers((FakeImageService(state_dir, events),))
    server.add_insecure_port("unix:" + sock)
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(0)


def pull(sock, version, image, ns, annotation, user, password, auth):
    req = pb.PullImageRequest(image=pb.ImageSpec(image=image.encode()))
    if user or password or auth:
        req.auth.username = user.encode()
        req.auth.password = password.encode()
        req.auth.auth = auth.encode()
    if ns != "-":
        req.sandbox_config.metadata.name = b"pod-1"
        req.sandbox_config.metadata.uid = b"pod-uid-1"
        req.sandbox_config.metadata.namespace = ns.encode()
        if annotation != "-":
            req.sandbox_config.annotations.add(key=b"pullgate.dev/credentials",
                                               value=annotation.encode())
    ch = grpc.insecure_channel("unix:" + sock)
    method = "/runtime.%s.ImageService/PullImage" % version
    try:
        raw = ch.unary_unary(method)(req.SerializeToString(), timeout=20)
        print("OK", pb.PullImageResponse.FromString(raw).image_ref.decode())
    except grpc.RpcError as e:
        print(e.code().name, e.details())


def main(argv):
    if argv[1] == "serve":
        serve(argv[2], argv[3], argv[4])
    elif argv[1] == "pull":
        pull(*argv[2:10])
    elif argv[1] == "image-id":
        print(image_id(argv[2]))
    else:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
