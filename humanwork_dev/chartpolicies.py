"""The Helm chart's admission policies, generated from the kustomize base so that the two
installs can never judge differently:

    python -m humanwork_dev.chartpolicies            # rewrite charts/.../templates/policies
    python -m humanwork_dev.chartpolicies --check    # exit 1 when a template is stale

Each file of `manifests/base/policies` becomes a template of the same name: rendered only
when `policies.enabled`, the namespace `humanwork-system` replaced by the release's, and
each policy's and binding's own name (and the policy a binding names) prefixed with
`clusterResourcePrefix` (cluster-scoped names must not collide between two releases).
`make lint` runs the check; the chart's tests compare `helm template` with `kustomize build`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = Path("manifests/base/policies")
TEMPLATES = Path("charts/humanwork-operator/templates/policies")
NAMESPACE = "humanwork-system"
SKIPPED = frozenset({"kustomization.yaml", "params.yaml"})
"""Not policies: the chart renders the bounds from its values (`admission-params.yaml`)."""
_OWN_NAME = re.compile(r"^(?P<key>  (?:name|policyName): )(?P<name>humanwork-\S+)$", re.M)


def template(base: str) -> str:
    """The chart's template for one base policy file."""
    text = base.replace(NAMESPACE, "{{ .Release.Namespace }}")
    text = _OWN_NAME.sub(r"\g<key>{{ .Values.clusterResourcePrefix }}\g<name>", text)
    return "{{- if .Values.policies.enabled }}\n" + text.rstrip("\n") + "\n{{- end }}\n"


def expected(root: Path = REPO) -> dict[Path, str]:
    """Every template the base asks for, by its path under `root`."""
    return {
        TEMPLATES / source.name: template(source.read_text())
        for source in sorted((root / BASE).glob("*.yaml"))
        if source.name not in SKIPPED
    }


def stale(root: Path = REPO) -> list[Path]:
    """The templates that differ from what the base gives, or that the base no longer has."""
    wanted = expected(root)
    found = {path.relative_to(root) for path in (root / TEMPLATES).glob("*.yaml")}
    differ = [p for p, text in wanted.items() if not (root / p).is_file()
              or (root / p).read_text() != text]  # fmt: skip
    return sorted(differ + [p for p in found if p not in wanted])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a template is stale")
    args = parser.parse_args(argv)
    if args.check:
        for path in stale():
            print(f"stale: {path} (run python -m humanwork_dev.chartpolicies)")
        return 1 if stale() else 0
    for path in (REPO / TEMPLATES).glob("*.yaml"):
        path.unlink()
    for path, text in expected().items():
        (REPO / path).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
