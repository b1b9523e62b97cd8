package symheap

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/cabi"
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

// TestJobSpan: what each launcher's variables say of a job on several
// nodes, and the refusal of such a job by a build that reaches only the
// PEs of its own node, saying what to build instead.
func TestJobSpan(t *testing.T) {
	for _, tc := range []struct {
		name              string
		env               map[string]string
		total, here, node int // the span read; total 0: one node
	}{
		{"shrun", map[string]string{"SYMHEAP_JOB": "j", "SYMHEAP_PE": "1", "SYMHEAP_NPES": "4"}, 0, 0, 0},
		{"ompi one node", map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
			"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_MCA_ess_base_jobid": "7"}, 0, 0, 0},
		{"ompi two nodes", map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
			"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_MCA_ess_base_jobid": "7"}, 4, 2, 0},
		{"ompi without local size", map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
			"OMPI_MCA_ess_base_jobid": "7"}, 0, 0, 0},
		{"hydra two nodes", map[string]string{"PMI_RANK": "3", "PMI_SIZE": "6", "MPI_LOCALNRANKS": "3", "PMI_JOBID": "9"}, 6, 3, 0},
		{"hydra one node", map[string]string{"PMI_RANK": "3", "PMI_SIZE": "6", "MPI_LOCALNRANKS": "6", "PMI_JOBID": "9"}, 0, 0, 0},
		{"slurm one node", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "5",
			"SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_TASKS_PER_NODE": "4", "SLURM_NODEID": "0"}, 0, 0, 0},
		{"slurm uneven", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "5",
			"SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_TASKS_PER_NODE": "3,1", "SLURM_NODEID": "1"}, 4, 1, 2},
		{"slurm repeated", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_JOB_ID": "5",
			"SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_TASKS_PER_NODE": "2(x3)", "SLURM_NODEID": "2"}, 6, 2, 3},
		{"slurm unknown layout", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_JOB_ID": "5",
			"SLURM_STEP_NUM_NODES": "2"}, 6, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := jobFromEnv(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if j.span.total != tc.total || j.span.here != tc.here || j.span.nodes != tc.node || (tc.total > 0) != (j.span.vars != "") {
				t.Errorf("span %+v, want %d PEs, %d here, %d nodes", j.span, tc.total, tc.here, tc.node)
			}
			_, _, err = discover(&j, settings{})
			if tc.total == 0 {
				if err != nil {
					t.Errorf("discover on one node: %v", err)
				}
				return
			}
			want := []string{fmt.Sprintf("has %d PEs", tc.total), "-tags ucx"}
			if tc.here > 0 {
				want = append(want, fmt.Sprintf("%d of them on this node", tc.here))
			} else {
				want = append(want, fmt.Sprintf("on %d nodes", tc.node))
			}
			if !errors.Is(err, ErrBadConfig) {
				t.Fatalf("discover across nodes: %v, want ErrBadConfig", err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("discover across nodes: %q does not say %q", err, w)
				}
			}
			// The C library names its own ucx build.
			cabi.Hosted = true
			_, _, err = discover(&j, settings{})
			cabi.Hosted = false
			if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "SYMHEAP_BOOT") || !strings.Contains(err.Error(), "make capi CAPI_TAGS=ucx") {
				t.Errorf("discover across nodes in the C library: %v", err)
			}
		})
	}
}

// TestJobTooLarge: a job larger than a segment holds is refused by the
// environment's reading, naming the variable and the bound.
func TestJobTooLarge(t *testing.T) {
	_, err := jobFromEnv(func(k string) string {
		return map[string]string{"SYMHEAP_JOB": "j", "SYMHEAP_PE": "0", "SYMHEAP_NPES": "10000"}[k]
	})
	if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "SYMHEAP_NPES=10000") || !strings.Contains(err.Error(), "512") {
		t.Errorf("10000 PEs: %v, want ErrBadConfig naming SYMHEAP_NPES and the bound", err)
	}
}

// TestHeapSizeErrors: every refused heap size names the setting that
// sized it.
func TestHeapSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		env  map[string]string
		want []string
	}{
		{Config{}, map[string]string{"SHMEM_SYMMETRIC_SIZE": "0"}, []string{`SHMEM_SYMMETRIC_SIZE="0"`, "must not be empty"}},
		{Config{}, map[string]string{"SHMEM_SYMMETRIC_SIZE": "4k"}, []string{"SHMEM_SYMMETRIC_SIZE=4k in the environment"}},
		{Config{}, map[string]string{"SHMEM_SYMMETRIC_SIZE": "100t"}, []string{`SHMEM_SYMMETRIC_SIZE="100t"`, "at most 64t"}},
		{Config{}, map[string]string{"SYMHEAP_SHARED_SIZE": "100t"}, []string{`SYMHEAP_SHARED_SIZE="100t"`}},
		{Config{HeapSize: 4096}, nil, []string{"Config.HeapSize"}},
		{Config{}, map[string]string{"SHMEM_SYMMETRIC_SIZE": "4k", "SYMHEAP_ALLOCATOR": "buddy"}, []string{"SHMEM_SYMMETRIC_SIZE=4k in the environment", `allocator "buddy" (SYMHEAP_ALLOCATOR=buddy in the environment)`}},
		{Config{}, map[string]string{"SYMHEAP_ALLOCATOR": "nosuch"}, []string{"SYMHEAP_ALLOCATOR=nosuch in the environment", `no allocator component "nosuch"`}},
	} {
		_, err := resolve(tc.cfg, func(k string) string { return tc.env[k] })
		if !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v %v: %v, want ErrBadConfig", tc.cfg, tc.env, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v %v: %q does not say %q", tc.cfg, tc.env, err, w)
			}
		}
	}
	if _, err := resolve(Config{}, func(k string) string { return map[string]string{"SYMHEAP_SHARED_SIZE": "0"}[k] }); err != nil {
		t.Errorf("no local shared heap: %v", err)
	}
}
