package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the job service's Prometheus series.
type metrics struct {
	finished *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// startCPU and runtimeCPU are the CPU time a fresh runtime took to
	// start, and in all by its end (start and jobs), by profile.
	startCPU, runtimeCPU *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_jobs_finished_total", Help: "Jobs finished, by action and final state.",
		}, []string{"action", "state"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_job_duration_seconds",
			Help:    "Time from a job's creation to its end, by action and final state.",
			Buckets: []float64{.05, .1, .15, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 360},
		}, []string{"action", "state"}),
		startCPU: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_job_runtime_start_cpu_seconds",
			Help:    "CPU time a fresh job runtime used to start (sandbox, runner, Chromium or LibreOffice), by profile.",
			Buckets: cpuBuckets,
		}, []string{"profile"}),
		runtimeCPU: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_job_runtime_cpu_seconds",
			Help:    "CPU time a job runtime used in all, start and jobs, measured as it is discarded, by profile.",
			Buckets: cpuBuckets,
		}, []string{"profile"}),
	}
}

var cpuBuckets = []float64{.1, .25, .5, .75, 1, 1.5, 2, 3, 5, 10, 30}

// finish records a job that reached a final state.
func (m *metrics) finish(j *Job) {
	m.finished.WithLabelValues(j.Action, j.State).Inc()
	if j.FinishedAt != nil {
		m.duration.WithLabelValues(j.Action, j.State).Observe(j.FinishedAt.Sub(j.CreatedAt).Seconds())
	}
}

// Collectors returns the service's metrics: finished jobs and their
// durations, jobs starting or running, and ready runtimes per profile.
func (s *Service) Collectors() []prometheus.Collector {
	out := []prometheus.Collector{s.metrics.finished, s.metrics.duration, s.metrics.startCPU, s.metrics.runtimeCPU,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_jobs_active", Help: "Jobs starting or running.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, _, _, err := s.store.ActiveJobs(ctx, "", "")
			if err != nil {
				return -1
			}
			return float64(n)
		}),
	}
	for _, name := range profiles {
		p := s.pools[name]
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_job_runtimes_ready", Help: "Fresh job runtimes started ahead, by profile.",
			ConstLabels: prometheus.Labels{"profile": name},
		}, func() float64 { return float64(len(p.ready)) }))
	}
	return out
}
