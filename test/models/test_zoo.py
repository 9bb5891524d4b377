"""The real-model zoo (issue 20): every model of `zoo.CASES` in every mode of `zoo.MODES`,
inference and training, against the same computation in PyTorch on the CPU."""

import pytest
import zoo


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("mode", list(zoo.MODES))
@pytest.mark.parametrize("name", list(zoo.CASES))
def test_zoo(name, mode, training):
    result = zoo.run(name, mode, training)
    assert result.samples_per_s > 0
