#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Compare a CRI proxy's answers with the runtime's own, call by call.

    cri_transparency.py --direct SOCK --proxy SOCK --gen-dir DIR
                        [--container CID] [--image IMG] [--timeout SECS]

Each call is made once to the runtime's socket and once through the proxy, with the same
request bytes, as raw bytes (no client-side (de)serialisation): ListImages, ListContainers,
ListPodSandbox, ImageStatus(IMG), ContainerStatus(CID), Version, and a method no runtime
serves. Answers must be equal:
  - the same status code and message;
  - the same response bytes; or, where the runtime itself may order repeated items
    differently from one call to the next (containerd lists its in-memory stores in map
    order), the same items as a set (parsed with runtime_v1_subset.proto, compared as
    dicts) AND the same multiset of bytes (a reordering changes no byte value).
Prints one "ok"/"FAIL" line per comparison; exit 0 only if all are ok.
"""
import argparse
import json
import sys

from cri_client import load_modules


def raw_call(chan, method, request, timeout):
    import grpc
    fn = chan.unary_unary(method)
    try:
        return "OK", "", fn(request, timeout=timeout)
    except grpc.RpcError as e:
        return e.code().name, e.details() or "", None


def normalised(pb, cls_name, data):
    """The message as a dict, with top-level repeated items in a canonical order."""
    from google.protobuf import json_format
    msg = getattr(pb, cls_name)()
    msg.ParseFromString(data)
    d = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    for k, v in d.items():
        if isinstance(v, list):
            d[k] = sorted(v, key=lambda x: json.dumps(x, sort_keys=True))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct", required=True)
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--gen-dir", required=True)
    ap.add_argument("--container", default="")
    ap.add_argument("--image", default="")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    pb, _ = load_modules(args.gen_dir)
    import grpc

    def chan(sock):
        return grpc.insecure_channel(sock if sock.startswith("unix:") else "unix://" + sock)

    direct, proxy = chan(args.direct), chan(args.proxy)
    rs, im = "/runtime.v1.RuntimeService/", "/runtime.v1.ImageService/"
    calls = [
        ("Version", rs + "Version", pb.VersionRequest(version="v1"), "VersionResponse"),
        ("ListImages", im + "ListImages", pb.ListImagesRequest(), "ListImagesResponse"),
        ("ListContainers", rs + "ListContainers", pb.ListContainersRequest(),
         "ListContainersResponse"),
        ("ListPodSandbox", rs + "ListPodSandbox", pb.ListPodSandboxRequest(),
         "ListPodSandboxResponse"),
        ("unknown method", rs + "NoSuchMethod", pb.VersionRequest(), None),
    ]
    if args.image:
        calls.append(("ImageStatus", im + "ImageStatus",
                      pb.ImageStatusRequest(image=pb.ImageSpec(image=args.image)),
                      "ImageStatusResponse"))
    if args.container:
        calls.append(("ContainerStatus", rs + "ContainerStatus",
                      pb.ContainerStatusRequest(container_id=args.container),
                      "ContainerStatusResponse"))

    failures = 0
    for name, method, req, resp_cls in calls:
        data = req.SerializeToString()
        d_code, d_msg, d_resp = raw_call(direct, method, data, args.timeout)
        p_code, p_msg, p_resp = raw_call(proxy, method, data, args.timeout)
        if (d_code, d_msg) != (p_code, p_msg):
            failures += 1
            print("FAIL %s: status differs: direct %s %r, proxy %s %r"
                  % (name, d_code, d_msg, p_code, p_msg))
            continue
        if d_code != "OK":
            print("ok   %s: same status %s %r" % (name, d_code, d_msg[:80]))
            continue
        if d_resp == p_resp:
            print("ok   %s: identical response bytes (%d bytes)" % (name, len(d_resp)))
            continue
        same_items = normalised(pb, resp_cls, d_resp) == normalised(pb, resp_cls, p_resp)
        same_bytes = sorted(d_resp) == sorted(p_resp)
        if same_items and same_bytes:
            print("ok   %s: same items, runtime's order differs (%d bytes)" % (name, len(d_resp)))
        else:
            failures += 1
            print("FAIL %s: answers differ (items equal: %s, byte multiset equal: %s)"
                  % (name, same_items, same_bytes))
    direct.close()
    proxy.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
