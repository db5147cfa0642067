"""The one SFTConfig road (gymflow.train.sft.sft_config): every argument reaches TRL's config."""

from gymflow.train.sft import KEEP_CHECKPOINTS, sft_config


def test_every_argument_reaches_the_config(tmp_path):
    config = sft_config(
        tmp_path, max_steps=15, batch_size=8, learning_rate=2e-4, warmup_steps=3, save_every=5,
        log_to_mlflow=False, device="cpu", seed=7, max_length=64, gradient_checkpointing=False,
    )  # fmt: skip
    assert config.seed == 7 and config.data_seed in (None, 7)  # the run's seed, not TRL's 42
    assert (config.max_steps, config.per_device_train_batch_size) == (15, 8)
    assert (config.learning_rate, config.warmup_steps, config.save_steps) == (2e-4, 3, 5)
    assert config.lr_scheduler_type == "constant_with_warmup" and config.weight_decay == 0.0
    assert config.save_total_limit == KEEP_CHECKPOINTS and config.report_to in ([], "none", ["none"])
    assert config.output_dir == str(tmp_path / "trainer") and config.max_length == 64
    assert config.use_cpu and not config.gradient_checkpointing
