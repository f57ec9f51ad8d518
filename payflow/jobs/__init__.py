"""The job machinery every domain's maintenance jobs are written against.

A job is `async def job(ctx: JobContext) -> JobResult`; a domain exports its jobs as
`JOBS` (a tuple of `JobSpec`), and the scheduler in the composition root only gathers
them. `purge_in_batches` is the batched, lock-guarded purge retention jobs share;
`job_lock` the per-job lock one replica holds while it runs a pass.
"""

from payflow.jobs.lock import job_lock
from payflow.jobs.purge import PurgeReport, purge_in_batches
from payflow.jobs.spec import JobContext, JobFn, JobResult, JobSpec, Outcome

__all__ = [
    "JobContext",
    "JobFn",
    "JobResult",
    "JobSpec",
    "Outcome",
    "PurgeReport",
    "job_lock",
    "purge_in_batches",
]
