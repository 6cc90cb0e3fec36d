#!/bin/sh
# A throwaway Slurm controller that reads the lines rackpilot exports, for test_exports.
#   slurmctld.sh start DIR FRAGMENT PORT   slurm.conf = a minimal head + FRAGMENT (the export);
#                                           munged and slurmctld run from DIR, on 127.0.0.1:PORT
#   slurmctld.sh stop DIR
# Afterwards `SLURM_CONF=DIR/slurm.conf scontrol show node -o` shows what Slurm made of the
# lines. Nothing is started as a service and nothing outside DIR is written; both daemons are
# Debian's (packages slurmctld, slurm-client, munge).
set -eu
cmd=$1 dir=$2
case $cmd in
start)
	frag=$3 port=$4
	mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
	chmod 700 "$dir/munge"
	# munged refuses a key that others can read, and a socket directory they cannot enter.
	head -c 1024 /dev/urandom >"$dir/munge/key"
	chmod 400 "$dir/munge/key"
	chmod 755 "$dir/munge"
	munged -f --socket="$dir/munge/sock" --key-file="$dir/munge/key" \
		--log-file="$dir/munged.log" --pid-file="$dir/munged.pid" --seed-file="$dir/munge/seed"
	cat >"$dir/slurm.conf" <<CONF
ClusterName=rackpilot-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
SlurmUser=$(id -un)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
GresTypes=gpu
CONF
	cat "$frag" >>"$dir/slurm.conf"
	SLURM_CONF="$dir/slurm.conf" setsid slurmctld -D -i -f "$dir/slurm.conf" \
		>"$dir/slurmctld.out" 2>&1 </dev/null &
	echo $! >"$dir/slurmctld.pid.own"
	i=0
	until SLURM_CONF="$dir/slurm.conf" scontrol ping 2>/dev/null | grep -q 'is UP'; do
		i=$((i + 1))
		if [ $i -ge 150 ] || ! kill -0 "$(cat "$dir/slurmctld.pid.own")" 2>/dev/null; then
			echo "slurmctld did not come up:" >&2
			tail -n 30 "$dir/slurmctld.out" >&2
			"$0" stop "$dir"
			exit 1
		fi
		sleep 0.2
	done
	;;
stop)
	# Gone before the caller removes DIR: slurmctld writes its state as it stops.
	for p in "$dir/slurmctld.pid.own" "$dir/munged.pid"; do
		[ -f "$p" ] || continue
		pid=$(cat "$p")
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		rm -f "$p"
	done
	;;
*)
	echo "usage: $0 start DIR FRAGMENT PORT | stop DIR" >&2
	exit 2
	;;
esac
