// Package pmix is symheap's bootstrap over PMIx, the process-management
// interface of the launchers that start jobs on several nodes (Open MPI's
// mpirun, Slurm's srun --mpi=pmix, prterun): who this process is, how big
// the job is, which node each rank runs on, and a key-value exchange with
// a collective fence.
//
// It is compiled only with the build tag ucx (it needs libpmix and cgo);
// in the default build the package is empty and symheap never asks for
// PMIx. The C types stay inside this package: its API is plain Go.
package pmix
