#!/usr/bin/env bash
# Installs the Debian packages the local cluster's real node and the image builds need,
# if any is missing (root; apt-get). Idempotent and quiet when all are there.
#   containerd, runc, containernetworking-plugins: the node's container runtime and CNI
#   nftables: kube-proxy's nftables mode; socat: the node's way to the API server
#   buildah, mmdebstrap: images from our Dockerfiles, and the Debian stand-in bases
#   gcc, libc6-dev: the static pause binary; openssl: the certificate of Kueue's webhooks
set -euo pipefail
packages=(containerd runc containernetworking-plugins nftables socat buildah mmdebstrap
  gcc libc6-dev iproute2 util-linux openssl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "host-packages: installing ${missing[*]}" >&2
if [ "$(id -u)" != 0 ]; then
  echo "host-packages: FAILED: installing packages needs root (apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
  || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
