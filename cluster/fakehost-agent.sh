#!/bin/bash
# fakehost-agent.sh: Open MPI's rsh agent for fake hosts on one machine.
# mpirun calls it as "AGENT [options] HOST COMMAND..."; it drops the host
# and runs the remote daemon here. Every host but the first gets its own
# IPC namespace and its own /dev/shm (a tmpfs), so that nothing but the
# network joins the PEs of different hosts.
while [ $# -gt 0 ]; do
	case "$1" in
	-*) shift ;;          # ssh options mpirun may pass
	*) break ;;
	esac
done
host=$1
shift
case "$host" in
nodeA|localhost|"$(hostname)") exec /bin/sh -c "$*" ;;
esac
exec unshare --ipc --mount /bin/sh -c "mount -t tmpfs -o size=2g,mode=1777 tmpfs /dev/shm && exec $*"
