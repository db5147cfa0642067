"""The scheduled deployment registers with its cron schedule on a real Prefect server."""

from __future__ import annotations

import asyncio


def test_deployment_registers_its_cron_schedule(prefect_engine):
    from prefect.client.orchestration import get_client
    from prefect.runner import Runner

    from gymflow.deployments.lifecycle import scheduled_lifecycle

    async def register():
        runner = Runner()
        deployment_id = await runner.add_flow(
            scheduled_lifecycle, name="nightly-test", cron="0 3 * * *", tags=["gymflow"]
        )
        async with get_client() as client:
            return await client.read_deployment(deployment_id)

    deployment = asyncio.run(register())
    assert deployment.name == "nightly-test"
    assert deployment.schedules[0].schedule.cron == "0 3 * * *"
    assert "gymflow" in deployment.tags
