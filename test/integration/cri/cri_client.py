#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A small CRI (runtime.v1) client for pullgate's integration tests.

Talks to a container runtime's CRI socket the way the kubelet does, using a
hand-written subset of the CRI proto (runtime_v1_subset.proto), compiled at run
time with grpc_tools.protoc into --gen-dir. Run with Debian's /usr/bin/python3
(python3-grpcio, python3-grpc-tools).

    cri_client.py --socket SOCK --gen-dir DIR version
    cri_client.py ... pull --image IMG [--username U --password-env VAR] [--server-address A]
                              [--auth-env VAR] [--pod-config FILE]  # sandbox_config as the kubelet sends it
    cri_client.py ... image-status --image IMG [--pod-config FILE]  # with the pod's annotations
    cri_client.py ... ensure-image --image IMG --pod-config FILE --policy IfNotPresent|Always|Never
                              [--username U --password-env VAR]
        # the kubelet's EnsureImageExists: ImageStatus with the pod's annotations, then
        # PullImage (the pod's credentials, sandbox_config) only when the image is not
        # present and the policy allows; prints {"outcome": present|pulled|ErrImageNeverPull|
        # ErrImagePull, "imageStatus": present|not present, "imageRef": ..., "error": ...};
        # exit 0 only for present/pulled
    cri_client.py ... remove-image --image IMG
    cri_client.py ... run-pod --name N --namespace NS --uid UID [--annotation K=V]...
                              [--log-dir DIR] --save FILE          # prints the pod sandbox id
    cri_client.py ... create --pod ID --pod-config FILE --name N --image IMG
                              [--annotation K=V]... [--log-path REL] [-- CMD ARGS...]
    cri_client.py ... start --id CID
    cri_client.py ... status --id CID                               # prints JSON
    cri_client.py ... wait --id CID [--timeout SECS]                # prints exit code
    cri_client.py ... stop --id CID | remove --id CID | stop-pod --id ID | remove-pod --id ID
    cri_client.py ... call --method /pkg.Service/Method      # empty request, raw bytes; prints the
                                                             # status code name and elapsed seconds

gRPC errors: "rpc error: code = CODE desc = DETAILS" on stderr, exit status 1.
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = "runtime_v1_subset.proto"


def load_modules(gen_dir):
    os.makedirs(gen_dir, exist_ok=True)
    pb2 = os.path.join(gen_dir, "runtime_v1_subset_pb2.py")
    if not os.path.exists(pb2):
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", HERE,
               "--python_out=" + gen_dir, "--grpc_python_out=" + gen_dir,
               os.path.join(HERE, PROTO)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stderr.write("protoc failed: %s\n%s" % (" ".join(cmd), r.stdout))
            sys.exit(3)
    sys.path.insert(0, gen_dir)
    return (importlib.import_module("runtime_v1_subset_pb2"),
            importlib.import_module("runtime_v1_subset_pb2_grpc"))


def kv_list(items):
    out = {}
    for it in items or []:
        if "=" not in it:
            raise SystemExit("bad KEY=VALUE: %r" % it)
        k, v = it.split("=", 1)
        out[k] = v
    return out


def pod_config(pb, spec):
    """PodSandboxConfig for a host-network pod (empty hostname: required with host network)."""
    ns_opts = pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=spec["name"], uid=spec["uid"],
                                       namespace=spec["namespace"], attempt=0),
        hostname="",
        log_directory=spec.get("log_dir", ""),
        labels={"io.kubernetes.pod.name": spec["name"],
                "io.kubernetes.pod.namespace": spec["namespace"],
                "io.kubernetes.pod.uid": spec["uid"]},
        annotations=spec.get("annotations", {}),
        linux=pb.LinuxPodSandboxConfig(
            security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns_opts)))


def pod_image_spec(pb, image, spec):
    """ImageSpec as the kubelet's EnsureImageExists sends it: every pod annotation."""
    return pb.ImageSpec(image=image, annotations=spec.get("annotations", {}) if spec else {})


def ensure_image(pb, im, args, t):
    """pkg/kubelet/images/image_manager.go EnsureImageExists, for one container."""
    with open(args.pod_config) as f:
        spec = json.load(f)
    r = im.ImageStatus(pb.ImageStatusRequest(image=pod_image_spec(pb, args.image, spec)),
                       timeout=t)
    ref = r.image.id
    status = "present" if ref else "not present"
    if ref and args.policy != "Always":
        return {"outcome": "present", "imageStatus": status, "imageRef": ref}
    if args.policy == "Never":
        return {"outcome": "ErrImageNeverPull", "imageStatus": status, "imageRef": ""}
    req = pb.PullImageRequest(image=pod_image_spec(pb, args.image, spec),
                              sandbox_config=pod_config(pb, spec))
    if args.username:
        pw = os.environ.get(args.password_env, "") if args.password_env else ""
        req.auth.CopyFrom(pb.AuthConfig(username=args.username, password=pw))
    import grpc  # noqa: E402
    try:
        r = im.PullImage(req, timeout=t)
    except grpc.RpcError as e:
        return {"outcome": "ErrImagePull", "imageStatus": status, "imageRef": "",
                "error": "%s: %s" % (e.code().name, e.details())}
    return {"outcome": "pulled", "imageStatus": status, "imageRef": r.image_ref}


def main():
    ap = argparse.ArgumentParser(description="minimal CRI client")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--gen-dir", required=True)
    ap.add_argument("--timeout", type=float, default=120.0, help="per-RPC timeout (s)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("version")
    p.add_argument("--count", type=int, default=1, help="calls on one channel (the last printed)")
    p = sub.add_parser("pull")
    p.add_argument("--image", required=True)
    p.add_argument("--username", default="")
    p.add_argument("--password-env", default="", help="name of an env var holding the password")
    p.add_argument("--server-address", default="")
    p.add_argument("--auth-env", default="", help="env var holding AuthConfig.auth (base64 user:pass)")
    p.add_argument("--pod-config", default="", help="pod spec saved by run-pod: sent as sandbox_config")
    p = sub.add_parser("call")
    p.add_argument("--method", required=True)
    p = sub.add_parser("image-status")
    p.add_argument("--image", required=True)
    p.add_argument("--pod-config", default="", help="send the pod's annotations, as the kubelet")
    p = sub.add_parser("image-status-raw", help="prints CODE and the answer's bytes in hex")
    p.add_argument("--image", required=True)
    p.add_argument("--pod-config", default="")
    p = sub.add_parser("ensure-image")
    p.add_argument("--image", required=True)
    p.add_argument("--pod-config", required=True)
    p.add_argument("--policy", choices=("IfNotPresent", "Always", "Never"), default="IfNotPresent")
    p.add_argument("--username", default="")
    p.add_argument("--password-env", default="")
    p = sub.add_parser("remove-image")
    p.add_argument("--image", required=True)
    p = sub.add_parser("run-pod")
    p.add_argument("--name", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--uid", required=True)
    p.add_argument("--annotation", action="append", default=[])
    p.add_argument("--log-dir", default="")
    p.add_argument("--runtime-handler", default="")
    p.add_argument("--save", required=True, help="file to store the pod config for 'create'")
    p = sub.add_parser("create")
    p.add_argument("--pod", required=True)
    p.add_argument("--pod-config", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--annotation", action="append", default=[])
    p.add_argument("--log-path", default="")
    p.add_argument("argv", nargs="*")
    for name in ("start", "status", "stop", "remove", "stop-pod", "remove-pod", "wait"):
        p = sub.add_parser(name)
        p.add_argument("--id", required=True)
        if name == "wait":
            p.add_argument("--wait-timeout", type=float, default=30.0)
    args = ap.parse_args()

    pb, pbg = load_modules(args.gen_dir)
    import grpc  # noqa: E402  (after argument errors)

    target = args.socket if args.socket.startswith("unix:") else "unix://" + args.socket
    chan = grpc.insecure_channel(target)
    rt = pbg.RuntimeServiceStub(chan)
    im = pbg.ImageServiceStub(chan)
    t = args.timeout

    try:
        if args.cmd == "version":
            for _ in range(args.count):
                r = rt.Version(pb.VersionRequest(version="v1"), timeout=t)
            print("%s %s %s" % (r.runtime_name, r.runtime_version, r.runtime_api_version))
        elif args.cmd == "pull":
            req = pb.PullImageRequest(image=pb.ImageSpec(image=args.image))
            if args.username or args.auth_env:
                pw = os.environ.get(args.password_env, "") if args.password_env else ""
                b64 = os.environ.get(args.auth_env, "") if args.auth_env else ""
                req.auth.CopyFrom(pb.AuthConfig(username=args.username, password=pw, auth=b64,
                                                server_address=args.server_address))
            if args.pod_config:
                with open(args.pod_config) as f:
                    req.sandbox_config.CopyFrom(pod_config(pb, json.load(f)))
            r = im.PullImage(req, timeout=t)
            print(r.image_ref)
        elif args.cmd == "call":
            # Any method, known or not: raw bytes both ways (no (de)serialisation).
            fn = chan.unary_unary(args.method)
            t0 = time.monotonic()
            try:
                fn(b"", timeout=t)
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            print("%s %.3f" % (code, time.monotonic() - t0))
        elif args.cmd == "image-status-raw":
            spec = None
            if args.pod_config:
                with open(args.pod_config) as f:
                    spec = json.load(f)
            body = pb.ImageStatusRequest(
                image=pod_image_spec(pb, args.image, spec)).SerializeToString()
            fn = chan.unary_unary("/runtime.v1.ImageService/ImageStatus")
            try:
                print("OK " + fn(body, timeout=t).hex())
            except grpc.RpcError as e:
                print("%s %s" % (e.code().name, e.details()))
        elif args.cmd == "ensure-image":
            out = ensure_image(pb, im, args, t)
            print(json.dumps(out))
            return 0 if out["outcome"] in ("present", "pulled") else 1
        elif args.cmd == "image-status":
            spec = None
            if args.pod_config:
                with open(args.pod_config) as f:
                    spec = json.load(f)
            r = im.ImageStatus(pb.ImageStatusRequest(image=pod_image_spec(pb, args.image, spec)),
                               timeout=t)
            if not r.image.id:
                sys.stderr.write("image not present\n")
                return 1
            print(json.dumps({"id": r.image.id, "repoTags": list(r.image.repo_tags),
                              "repoDigests": list(r.image.repo_digests)}))
        elif args.cmd == "remove-image":
            im.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=args.image)), timeout=t)
        elif args.cmd == "run-pod":
            # The kubelet's own annotations on every pod it runs (pkg/kubelet/config):
            # config.source and config.seen (when it first saw the pod, RFC 3339, ns).
            ann = {"kubernetes.io/config.source": "api",
                   "kubernetes.io/config.seen": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
                   + ".%09dZ" % (time.time_ns() % 1000000000)}
            ann.update(kv_list(args.annotation))
            spec = {"name": args.name, "namespace": args.namespace, "uid": args.uid,
                    "annotations": ann, "log_dir": args.log_dir}
            r = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod_config(pb, spec),
                                                         runtime_handler=args.runtime_handler),
                                 timeout=t)
            with open(args.save, "w") as f:
                json.dump(spec, f)
            print(r.pod_sandbox_id)
        elif args.cmd == "create":
            with open(args.pod_config) as f:
                spec = json.load(f)
            argv = list(args.argv)
            cfg = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name=args.name, attempt=0),
                image=pb.ImageSpec(image=args.image),
                command=argv[:1], args=argv[1:],
                labels={"io.kubernetes.container.name": args.name,
                        "io.kubernetes.pod.name": spec["name"],
                        "io.kubernetes.pod.namespace": spec["namespace"],
                        "io.kubernetes.pod.uid": spec["uid"]},
                annotations=kv_list(args.annotation),
                log_path=args.log_path,
                linux=pb.LinuxContainerConfig(security_context=pb.LinuxContainerSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER,
                                                         ipc=pb.POD))))
            r = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=args.pod, config=cfg, sandbox_config=pod_config(pb, spec)),
                timeout=t)
            print(r.container_id)
        elif args.cmd == "start":
            rt.StartContainer(pb.StartContainerRequest(container_id=args.id), timeout=t)
        elif args.cmd == "status":
            s = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=args.id), timeout=t).status
            print(json.dumps({"id": s.id, "state": pb.ContainerState.Name(s.state),
                              "exitCode": s.exit_code, "imageRef": s.image_ref,
                              "image": s.image.image, "reason": s.reason, "message": s.message,
                              "logPath": s.log_path}))
        elif args.cmd == "wait":
            deadline = time.monotonic() + args.wait_timeout
            while True:
                s = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=args.id),
                                       timeout=t).status
                if s.state == pb.CONTAINER_EXITED:
                    print(s.exit_code)
                    break
                if time.monotonic() > deadline:
                    sys.stderr.write("timeout waiting for %s (state %s)\n"
                                     % (args.id, pb.ContainerState.Name(s.state)))
                    return 1
                time.sleep(0.2)
        elif args.cmd == "stop":
            rt.StopContainer(pb.StopContainerRequest(container_id=args.id, timeout=2), timeout=t)
        elif args.cmd == "remove":
            rt.RemoveContainer(pb.RemoveContainerRequest(container_id=args.id), timeout=t)
        elif args.cmd == "stop-pod":
            rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=args.id), timeout=t)
        elif args.cmd == "remove-pod":
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=args.id), timeout=t)
    except grpc.RpcError as e:
        sys.stderr.write("rpc error: code = %s desc = %s\n" % (e.code().name, e.details()))
        return 1
    finally:
        chan.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
