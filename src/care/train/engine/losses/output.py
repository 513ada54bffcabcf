"""What a composite loss returns: the total to back-propagate and its parts to log."""

from __future__ import annotations

from typing import NamedTuple

import torch


class LossOutput(NamedTuple):
    """``total, parts = composite_loss(...)``.

    Attributes:
        loss: scalar tensor to call ``.backward()`` on (the weighted sum).
        components: ``{term name: unweighted value}``, detached, for logging. Terms whose weight is
            0 are skipped entirely and do not appear.
    """

    loss: torch.Tensor
    components: dict[str, torch.Tensor]
