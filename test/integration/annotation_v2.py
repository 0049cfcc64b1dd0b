#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""An independent reading of a keyed (v2) credentials annotation, from the text of
docs/annotation-hmac.md only (python3-cryptography, not the C code under test).

    annotation_v2.py KEYFILE NAMESPACE ANNOTATION_JSON

prints one JSON line per secret item of the pod's namespace:
{"image": ..., "namespace": ..., "name": ..., "uid": ..., "hash": H, "authHash": A}
after checking every entry's v2 "hmac" and opening every sealed value; exits 1 with a
message on the first entry that does not verify or value that does not open.
Importable: open_annotation(key, namespace, annotation) -> list of those dicts.
"""
import base64
import hashlib
import hmac
import json
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SEAL_INFO = b"pullgate-annotation-seal-v2"


def seal_key(key: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=SEAL_INFO).derive(key)


def associated_data(ns: str, name: str, uid: str) -> bytes:
    return f"pullgate-sealed-v2\n{ns}\n{name}\n{uid}\n".encode()


def unseal(key: bytes, ns: str, name: str, uid: str, text: str):
    if len(text) != 107:
        raise ValueError("sealedHashes is not 107 characters")
    raw = base64.urlsafe_b64decode(text + "=")
    plain = AESSIV(seal_key(key)).decrypt(raw, [associated_data(ns, name, uid)])
    return plain[:32].hex(), plain[32:].hex()


def seal(key: bytes, ns: str, name: str, uid: str, h: str, a: str) -> str:
    raw = AESSIV(seal_key(key)).encrypt(bytes.fromhex(h) + bytes.fromhex(a),
                                        [associated_data(ns, name, uid)])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def entry_mac(key: bytes, ns: str, image: str, entry: dict) -> str:
    secrets = entry.get("kubernetesSecrets", [])
    v2 = any("sealedHashes" in s for s in secrets)
    field = "sealedHashes" if v2 else "credentialHash"
    lines = sorted((s["namespace"], s["name"], s["uid"], s.get(field, "")) for s in secrets)
    sas = sorted((s["namespace"], s["name"], s["uid"])
                 for s in entry.get("kubernetesServiceAccounts", []))
    msg = f"pullgate-annotation-v{2 if v2 else 1}\n{ns}\n{image}\n"
    msg += "".join(f"secret\t{a}\t{b}\t{c}\t{d}\n" for a, b, c, d in lines)
    msg += "".join(f"sa\t{a}\t{b}\t{c}\n" for a, b, c in sas)
    return hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()


def open_annotation(key: bytes, ns: str, annotation: dict):
    out = []
    for image, entry in annotation.items():
        if entry.get("hmac") != entry_mac(key, ns, image, entry):
            raise ValueError(f"entry {image}: hmac does not verify for {ns}")
        for s in entry.get("kubernetesSecrets", []):
            if s["namespace"] != ns:
                continue
            if "credentialHash" in s or "authHash" in s:
                raise ValueError(f"entry {image}: a clear hash in a keyed annotation")
            h, a = unseal(key, s["namespace"], s["name"], s["uid"], s["sealedHashes"])
            out.append({"image": image, "namespace": s["namespace"], "name": s["name"],
                        "uid": s["uid"], "hash": h, "authHash": a})
    return out


def main():
    key = open(sys.argv[1], "rb").read()
    try:
        for item in open_annotation(key, sys.argv[2], json.loads(sys.argv[3])):
            print(json.dumps(item))
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        print(f"annotation_v2: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
