#!/usr/bin/env bash
# The API reference from the docstrings, into build/site/ (MkDocs + mkdocstrings; warnings are errors).
# mkdocstrings reads source files: the package is installed as files under build/docs-src first, since
# the repository's folders (sims/, policies/, ...) only become embody.* through setup.py's mapping.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build/docs-src
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --target build/docs-src . \
  2> >(grep -v "^WARNING: Location" >&2)
.venv/bin/mkdocs build --strict --quiet
echo "API reference: build/site/index.html" >&2
