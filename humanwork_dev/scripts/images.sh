#!/usr/bin/env bash
# Build the three container images without Docker: buildah (Debian's package, no daemon)
# runs the project's own Dockerfiles on a base image made here from Debian's packages
# (debootstrap bookworm minbase + python3.11), since no container registry is reachable.
#
#   humanwork_dev/scripts/images.sh                build (cached) and print the image sizes
#   humanwork_dev/scripts/images.sh --archive DIR  also write each image as DIR/<name>.tar (docker
#                                          archive) for `ctr images import`
#
# Everything lands outside the repository, in $HUMANWORK_CACHE/images: the base's rootfs,
# buildah's storage (overlay; STORAGE_DRIVER=vfs where overlay is unavailable) and the
# wheels of requirements.lock (downloaded once by the host's pip and mounted read-only
# into the build's RUN steps with a pip.conf that forbids any index: the build itself
# runs with --network none).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}/images"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_TAG="localhost/humanwork/base:${SUITE}-python3.11"
VERSION="${IMAGE_VERSION:-0.1.0}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
ARCHIVE=""
[ "${1:-}" = "--archive" ] && ARCHIVE="${2:?--archive needs a directory}"

bash "$REPO/humanwork_dev/scripts/node-packages.sh"
mkdir -p "$CACHE/wheels"
BUILDAH=(buildah --root "$CACHE/storage" --runroot "$CACHE/run"
         --storage-driver "${STORAGE_DRIVER:-overlay}")
t0=$(date +%s)

# --- the base: Debian bookworm minbase with the interpreter, venv and CA certificates
if ! "${BUILDAH[@]}" inspect --type image "$BASE_TAG" >/dev/null 2>&1; then
  echo "images: making the base $BASE_TAG with debootstrap ($MIRROR)" >&2
  rootfs="$CACHE/base-rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase \
    --include=python3,python3-venv,python-is-python3,ca-certificates \
    "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* \
         "$rootfs"/usr/share/info/* "$rootfs"/debootstrap
  ctr=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  cp -a "$rootfs"/. "$mnt"/
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 \
    --label org.opencontainers.image.description="Debian $SUITE minbase + python3.11 (debootstrap)" \
    "$ctr"
  "${BUILDAH[@]}" commit --rm "$ctr" "$BASE_TAG" >/dev/null
  rm -rf "$rootfs"
  echo "images: base made in $(( $(date +%s) - t0 ))s" >&2
fi

# --- the wheels, fetched once by the host's pip; the build reads them with no index
"$PYTHON" -m pip download --quiet --only-binary=:all: -d "$CACHE/wheels" "setuptools>=77" wheel
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
  -r "$REPO/requirements.lock" -d "$CACHE/wheels"
printf '[global]\nno-index = true\nfind-links = /wheels\n' > "$CACHE/pip.conf"

# --- the three images, from the Dockerfiles as Docker users run them
for spec in operator:operator platform:platform-api agent:agent; do
  file="Dockerfile.${spec%%:*}"; name="humanwork/${spec##*:}"
  t1=$(date +%s)
  "${BUILDAH[@]}" bud --quiet --layers --pull=never --network none --isolation "${BUILD_ISOLATION:-oci}" \
    --build-arg "BASE=$BASE_TAG" \
    -v "$CACHE/wheels:/wheels:ro" -v "$CACHE/pip.conf:/etc/pip.conf:ro" \
    -f "$REPO/$file" -t "$name:$VERSION" "$REPO" >/dev/null
  echo "images: $name:$VERSION built in $(( $(date +%s) - t1 ))s" >&2
  if [ -n "$ARCHIVE" ]; then  # written again only when the image changed
    mkdir -p "$ARCHIVE"
    id=$("${BUILDAH[@]}" inspect --type image --format '{{.FromImageID}}' "$name:$VERSION")
    tar="$ARCHIVE/${spec##*:}.tar"
    if [ ! -f "$tar" ] || [ "$(cat "$tar.id" 2>/dev/null)" != "$id" ]; then
      rm -f "$tar"
      "${BUILDAH[@]}" push --quiet "$name:$VERSION" "docker-archive:$tar:docker.io/$name:$VERSION"
      echo "$id" > "$tar.id"
    fi
  fi
done
echo "images: done in $(( $(date +%s) - t0 ))s" >&2
"${BUILDAH[@]}" images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E 'humanwork/' | sort
