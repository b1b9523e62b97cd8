#!/bin/bash
# agent.sh: Open MPI's rsh agent (--mca plm_rsh_agent) for fake hosts on
# one machine. mpirun runs it as "agent.sh [ssh options] HOST COMMAND...";
# it drops the host name and runs the remote daemon here, in an IPC
# namespace and a mount namespace of its own with a fresh tmpfs on
# /dev/shm, so that nothing but the network joins the PEs of different
# hosts. When the daemon ends it reports any symheap segment left in its
# /dev/shm on stderr ("fakehost HOST: leftover ...") before the tmpfs goes
# away with the namespace.
while [ $# -gt 0 ]; do
	case "$1" in
	-*) shift ;;
	*) break ;;
	esac
done
host=$1
shift
exec unshare --ipc --mount /bin/bash -c '
mount -t tmpfs -o size=4g,mode=1777 tmpfs /dev/shm || exit 1
# A session directory of its own: the hosts share /tmp and a host name.
export OMPI_MCA_orte_tmpdir_base=/tmp/symheap-fakehost-$$
mkdir -p "$OMPI_MCA_orte_tmpdir_base"
/bin/sh -c "$1"
rc=$?
for f in /dev/shm/*; do
	[ -e "$f" ] && echo "fakehost $0: leftover $f" >&2
done
rm -rf "$OMPI_MCA_orte_tmpdir_base"
exit $rc' "$host" "$*"
