# Native libraries and the Python package of fzsidecar. Everything builds
# into build/ (gitignored); `go build ./...` and `go test ./...` need none of it.
#
#   make libfz      build/lib/libfz.so + build/include/fz.h   (C ABI of the codec and store)
#   make python     libfz, then pip-installs python/ (package fzsidecar) with no network
#   make producer   C/Fortran producer library (issue #28)
#   make hdf5       HDF5 filter plugin over libfz (issue #32)
#   make test       go vet + go test ./... (the README's test command), then the
#                   list of tests skipped for a missing MinIO, toolchain, GPU or
#                   ../shared/data (go test hides what a passing package prints)
#
# PYTHON picks the interpreter (default Debian's /usr/bin/python3). Inside a
# virtual environment `make python` installs into it; otherwise into the
# user's site-packages (pip install --user; Debian's PEP 668 marker needs
# --break-system-packages for that, which leaves /usr untouched).
# PIP_FLAGS adds pip flags. From a checkout without installing:
# make libfz, then PYTHONPATH=python (the package finds build/lib/libfz.so).

GO      ?= go
# The cuda package's host emulations of the GPU kernels take 6-9 minutes on a
# 2-core machine with the other packages running beside them: go test's
# 10-minute default per package is too close (it ran out once under load).
# 30 minutes was close too: on 2026-12-01 the package took 913 s alone and
# 1534 s in `make test` beside the others (805-876 s the day before).
GOTESTFLAGS ?= -timeout 45m
PYTHON  ?= $(if $(VIRTUAL_ENV),python3,/usr/bin/python3)
BUILD   := build
LIBDIR  := $(BUILD)/lib
INCDIR  := $(BUILD)/include

.PHONY: all test libfz python producer hdf5 clean FORCE

all: libfz

libfz: $(LIBDIR)/libfz.so $(INCDIR)/fz.h

# Go decides what is stale; FORCE makes make ask it every time.
$(LIBDIR)/libfz.so: FORCE
	@mkdir -p $(LIBDIR)
	$(GO) build -buildmode=c-shared -o $@ ./libfz
	@rm -f $(LIBDIR)/libfz.h  # cgo's generated header; the contract is libfz/fz.h

$(INCDIR)/fz.h: libfz/fz.h
	@mkdir -p $(INCDIR)
	cp $< $@

python: libfz
	@# pip installs offline with the interpreter's own setuptools (no build
	@# isolation: nothing can be downloaded), so say plainly what is missing
	@# instead of pip's "invalid command 'bdist_wheel'".
	@$(PYTHON) -c 'import numpy' 2>/dev/null || { echo "make python: $(PYTHON) has no numpy (needed at run time; nothing can be downloaded here). Use Debian's python3 with python3-numpy, or a venv made by '/usr/bin/python3 -m venv --system-site-packages'." >&2; exit 1; }
	@$(PYTHON) -c 'import setuptools' 2>/dev/null || { echo "make python: $(PYTHON) has no setuptools (pip builds the package with it, offline). Install python3-setuptools, or use a venv made by '/usr/bin/python3 -m venv --system-site-packages'." >&2; exit 1; }
	@$(PYTHON) -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("wheel") or u.find_spec("setuptools.command.bdist_wheel") else 1)' || { echo "make python: $(PYTHON) can build no wheel (its setuptools is older than 70.1 and the wheel package is missing). Install python3-wheel (Debian), or use a venv made by '/usr/bin/python3 -m venv --system-site-packages'." >&2; exit 1; }
	@mkdir -p python/fzsidecar/_lib
	cp $(LIBDIR)/libfz.so python/fzsidecar/_lib/libfz.so
	@if [ -f $(LIBDIR)/libfzproducer.so ]; then cp $(LIBDIR)/libfzproducer.so python/fzsidecar/_lib/; \
	else echo "note: no $(LIBDIR)/libfzproducer.so: fzsidecar.producer needs \`make producer\` first"; fi
	$(PYTHON) -m pip install --no-index --no-build-isolation --no-deps --force-reinstall \
		$$($(PYTHON) -c 'import sys; print("" if sys.prefix != sys.base_prefix else "--user --break-system-packages")') \
		$(PIP_FLAGS) ./python
	@# The installed package has its copy; a stale one here would shadow build/lib for PYTHONPATH=python.
	@rm -rf python/build python/fzsidecar.egg-info python/fzsidecar/_lib
	$(PYTHON) -c 'import fzsidecar, sys; print("installed fzsidecar", fzsidecar.__version__, "for", sys.executable)'

# libfzproducer (shared + static), fzproducer.h, the Fortran module and the
# examples, built with CMake in build/producer (docs/PRODUCERS.md).
producer:
	cmake -S producer -B $(BUILD)/producer -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)/producer -j
	@mkdir -p $(LIBDIR) $(INCDIR)
	cp -P $(BUILD)/producer/libfzproducer.so* $(BUILD)/producer/libfzproducer.a $(LIBDIR)/
	cp producer/include/fzproducer.h $(INCDIR)/
	@if [ -d $(BUILD)/producer/mod ]; then cp $(BUILD)/producer/mod/*.mod $(INCDIR)/ && cp $(BUILD)/producer/libfzproducer_fortran.a $(LIBDIR)/; fi

# build/hdf5-plugins/libh5zfz.so (HDF5_PLUGIN_PATH=build/hdf5-plugins; it finds ../lib/libfz.so) + build/include/h5z_fz.h
hdf5: libfz
	$(MAKE) -C hdf5 BUILD=$(abspath $(BUILD))

# FZ_SKIP_LOG collects every skip recorded by internal/skiplog; the list is
# printed whether the tests passed or not, and make fails if they failed.
test:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/test-skips.log
	$(GO) vet ./...
	@FZ_SKIP_LOG=$(abspath $(BUILD))/test-skips.log $(GO) test $(GOTESTFLAGS) ./...; rc=$$?; \
	if [ -s $(BUILD)/test-skips.log ]; then \
		echo; echo "==== SKIPPED: $$(sort -u $(BUILD)/test-skips.log | wc -l) tests did not run; how many, and why ===="; \
		sort -u $(BUILD)/test-skips.log | sed 's/^[^:]*: //' | sort | uniq -c | sort -rn; \
		echo "==== (bash .ci/install-apt.sh and bash .ci/install-minio.sh install what CI has; GPU tests need a CUDA machine) ===="; \
	else echo "no test skipped for a missing tool, GPU or data set"; fi; exit $$rc

clean:
	rm -rf $(BUILD) python/fzsidecar/_lib python/build python/fzsidecar.egg-info
