"""The one LoRA settings dataclass: what a document tower's adapter is (paper: r=32, alpha=64, all projections).

Torch-free, so a training config (:class:`care.train.engine.config.ModelConfig`, section ``model.lora``) can hold
it without importing a model; :mod:`care.models.lora` turns it into a peft adapter. It validates itself on
construction; an error names the field (``config field 'model.lora.r': must be > 0, got 0`` inside a config).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from care.config import Config, ConfigError

#: Qwen3 / Llama-style projection names: all attention and MLP linear layers (the paper's choice).
DEFAULT_TARGET_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _refuse(name: str, problem: str) -> ConfigError:
    error = ConfigError(f"config field '{name}': LoRA {problem}")
    error.field, error.problem = name, f"LoRA {problem}"
    return error


@dataclass(frozen=True)
class LoraSettings(Config):
    """LoRA hyper-parameters: rank ``r``, scale ``alpha`` (the update is ``(alpha / r) * B A``), dropout on the
    adapter's input, and the names of the linear layers to adapt.

    Raises:
        ConfigError: ``r`` or ``alpha`` not positive, ``dropout`` outside [0, 1), no target module.
    """

    r: int = 32
    alpha: int = 64
    dropout: float = 0.05
    target_modules: tuple[str, ...] = field(default=DEFAULT_TARGET_MODULES)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_modules", tuple(self.target_modules))
        for name in ("r", "alpha"):
            if getattr(self, name) <= 0:
                raise _refuse(name, f"{name} must be positive (> 0), got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise _refuse("dropout", f"dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise _refuse("target_modules", "target_modules is empty; name the linear layers to adapt, "
                                            "e.g. [q_proj, v_proj]")

    def to_peft_config(self):  # -> peft.LoraConfig
        """The equivalent ``peft.LoraConfig`` (no bias training)."""
        from peft import LoraConfig

        return LoraConfig(
            r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
            target_modules=list(self.target_modules), bias="none",
        )
