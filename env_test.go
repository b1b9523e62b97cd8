package symheap

import (
	"errors"
	"testing"
)

func TestJobFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env        map[string]string
		id         string
		rank, npes int
		bad        bool
	}{
		{env: map[string]string{"SYMHEAP_JOB": "j1", "SYMHEAP_PE": "2", "SYMHEAP_NPES": "4"}, id: "j1", rank: 2, npes: 4},
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_MCA_ess_base_jobid": "77"}, id: "ompi-77", rank: 1, npes: 2},
		{env: map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_RANK": "4", "PMIX_NAMESPACE": "ns"}, id: "ompi-ns", rank: 0, npes: 2},
		{env: map[string]string{"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_JOBID": "9"}, id: "pmi-9", rank: 3, npes: 4},
		{env: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "55", "SLURM_STEP_ID": "2"}, id: "slurm-55.2", rank: 0, npes: 8},
		{env: map[string]string{"SYMHEAP_PE": "4", "SYMHEAP_NPES": "4", "SYMHEAP_JOB": "x"}, bad: true},
		{env: map[string]string{"SYMHEAP_PE": "a", "SYMHEAP_NPES": "4", "SYMHEAP_JOB": "x"}, bad: true},
		{env: map[string]string{"SYMHEAP_PE": "0", "SYMHEAP_NPES": "1"}, bad: true}, // no job id
		{env: map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, bad: true},
		{env: map[string]string{}, rank: 0, npes: 1},
	} {
		j, err := jobFromEnv(func(k string) string { return tc.env[k] })
		if tc.bad {
			if !errors.Is(err, ErrBadConfig) {
				t.Errorf("%v: err %v, want ErrBadConfig", tc.env, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if (tc.id != "" && j.id != tc.id) || j.rank != tc.rank || j.npes != tc.npes {
			t.Errorf("%v: got %+v", tc.env, j)
		}
	}
}
