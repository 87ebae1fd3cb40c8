#!/bin/bash
# A Slurm job that runs one fzsidecar per node beside the simulation's ranks.
# docs/DEPLOY.md explains the layout; adapt the #SBATCH lines, paths and the
# application line. Assumes:
#   - a 3-server NATS JetStream cluster reachable from the compute nodes
#     (FZ_NATS_URL below), with a user for the sidecars and one for producers;
#   - an S3 bucket (FZ_SINK) and its credentials in the environment;
#   - fzsidecar on PATH on every node.
#SBATCH --job-name=sim-with-fzsidecar
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=32   # = RANKS_PER_NODE + SIDECAR_CPUS below (one CPU a task)
#SBATCH --time=02:00:00
#SBATCH --exclusive
set -euo pipefail

# --- cluster-wide settings (the same on every node) -------------------------
export FZ_NATS_URL="nats://nats-0.example.org:4222,nats://nats-1.example.org:4222,nats://nats-2.example.org:4222"
export FZ_JETSTREAM_REPLICAS=3                 # streams kept by all 3 NATS servers
export FZ_SINK="s3://simulations"              # one bucket for every node (and job)
export AWS_ENDPOINT_URL="https://s3.example.org"  # serve, ls and get all read it
export RUN="heat-${SLURM_JOB_ID}"               # run names are global: carry the job id
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY come from the user's environment
# or a file only they can read, e.g.:  source ~/.config/fzsidecar/s3.env
# NATS users of deploy/nats/nats-server.conf: the sidecars' (JetStream rights)
# and the producers' (only their subjects). Passwords from files only the
# user can read, passed in the environment (flags would show in ps).
SIDECAR_PASSWORD_FILE="$HOME/.config/fzsidecar/sidecar.password"
PRODUCER_PASSWORD_FILE="$HOME/.config/fzsidecar/producer.password"

# --- per-node settings: computed on each node -------------------------------
# The subject prefix names the node: shared memory is node-local, so a
# producer must reach its own node's sidecar and no other. Dots and other
# characters outside A-Z a-z 0-9 _ - become '-'.
node_prefix='fz-$(hostname -s | tr -c "A-Za-z0-9_\n-" "-")'
shm_dir="/dev/shm/fzsidecar-${SLURM_JOB_ID}"   # per job: segments of one user only

# The job's 32 CPUs a node are split: SIDECAR_CPUS for the sidecar's step,
# RANKS_PER_NODE for the application's (change the #SBATCH line with them).
# Each step names its memory too: where Slurm schedules memory, a step
# without --mem asks for all of the job's and would wait for the other.
# The shm segments count to the ranks that write them, so RANKS_MEM covers
# the application plus the sidecar's --budget; leave some for the system.
SIDECAR_CPUS=4
SIDECAR_MEM=8G
RANKS_PER_NODE=28
RANKS_MEM=200G

# Cleanup runs however the script ends: success, a failing step (set -e
# exits at once), or scancel / the time limit (SIGTERM; bash runs the EXIT
# trap on a signal only when it has a trap for it, hence the second one).
# Without it, a failing application left the sidecars running and the shm
# directories full on the nodes.
sidecars=""
stop_sidecars() {
	# SIGTERM lets each sidecar finish what is still in flight (drain
	# timeout) and stop.
	if [ -n "$sidecars" ]; then
		kill -TERM "$sidecars" || true
		wait "$sidecars" || true
		sidecars=""
	fi
}
cleanup() {
	local rc=$?
	trap - EXIT TERM INT
	set +e
	stop_sidecars
	# The segments are gone once their results are in (and useless once
	# their producers are gone); remove the directories on every node.
	srun --overlap --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \
		rm -rf "$shm_dir" "/tmp/fzsidecar-$SLURM_JOB_ID"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# One sidecar per node, on SIDECAR_CPUS CPUs of its own: without --overlap
# the step keeps them for the whole job (Slurm gives steps exclusive CPUs),
# and the application's step below gets the other RANKS_PER_NODE. Its own
# log per node.
srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --cpus-per-task="$SIDECAR_CPUS" --mem="$SIDECAR_MEM" \
	--kill-on-bad-exit=0 --output="fzsidecar-%j-%N.log" \
	bash -c "export FZ_NATS_SUBJECT_PREFIX=$node_prefix FZ_NATS_USER=alice-sidecar
		export FZ_NATS_PASSWORD=\$(cat $SIDECAR_PASSWORD_FILE)
		exec fzsidecar serve --shm-dir $shm_dir \
			--data-dir /tmp/fzsidecar-\$SLURM_JOB_ID --budget 16GiB --codec-threads $SIDECAR_CPUS \
			--backend auto --metrics-listen 127.0.0.1:9464" &
sidecars=$!

# Wait until every node's sidecar answers its health check (--overlap: this
# step needs no CPU of its own).
srun --overlap --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 bash -c '
	for i in $(seq 1 120); do
		curl -fsS http://127.0.0.1:9464/healthz >/dev/null 2>&1 && exit 0
		sleep 1
	done
	echo "fzsidecar on $(hostname) not healthy after 120 s" >&2; exit 1'

# The application: every rank publishes through its node's sidecar. The
# producer libraries take prefix, shm_dir and credentials as options; here
# the application reads them from these variables (set per node by bash -c).
srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node="$RANKS_PER_NODE" --mem="$RANKS_MEM" bash -c "
	export FZ_NATS_SUBJECT_PREFIX=$node_prefix FZ_SHM_DIR=$shm_dir FZ_NATS_USER=alice-producer
	export FZ_NATS_PASSWORD=\$(cat $PRODUCER_PASSWORD_FILE)
	exec ./heat_mpi --run $RUN --steps 1000 --out-every 10"

# The application waited for its results before exiting (the producer
# libraries' wait), so nothing is queued any more. The EXIT trap removes
# the directories.
stop_sidecars
fzsidecar ls --sink "$FZ_SINK" --run "$RUN" || true
