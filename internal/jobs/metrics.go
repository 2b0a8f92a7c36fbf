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
	}
}

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
	out := []prometheus.Collector{s.metrics.finished, s.metrics.duration,
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
