import pytest

from course_utils import op_profile


def _trace(tmp_path, lines):
    """A small XSpace as TensorFlow's profiler writes it: events named by metadata, stats by reference."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.planes.add(name="Task Environment")
    plane = space.planes.add(name="/host:CPU")
    ids = {}

    def meta(table, name):
        if (table, name) not in ids:
            ids[(table, name)] = len(ids) + 1
            getattr(plane, table)[ids[(table, name)]].name = name
        return ids[(table, name)]

    for line_name, events in lines.items():
        line = plane.lines.add(name=line_name, timestamp_ns=1000)
        for name, start_us, duration_us, stats in events:
            e = line.events.add(metadata_id=meta("event_metadata", name), offset_ps=start_us * 10**6,
                                duration_ps=duration_us * 10**6)
            for key, value in stats.items():
                e.stats.add(metadata_id=meta("stat_metadata", key), ref_value=meta("stat_metadata", value))
    path = tmp_path / "plugins" / "profile" / "2026_11_24_20_00_00" / "vm.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(space.SerializeToString())
    return tmp_path


def test_ops_are_given_to_the_untraced_step_they_start_in_and_named_by_owner(tmp_path):
    step = "multi_step_on_iterator"
    logdir = _trace(tmp_path, {
        "python": [(step, 0, 100, {"tf_function_call": "traced-nonXla"}),  # tracing: left out
                   (step, 200, 100, {"tf_function_call": "notTraced-nonXla"}),
                   (step, 400, 50, {"tf_function_call": "notTraced-nonXla"})],
        "tf_Compute/1": [("cnn/conv1/Conv2D:_MklNativeFusedConv2D", 10, 80, {}),  # in the traced call
                         ("cnn/conv1/Conv2D:_MklNativeFusedConv2D", 210, 40, {}),
                         ("grad/conv2:_MklNativeConv2DBackpropFilterWithBias", 250, 40, {}),
                         ("adam/AddN_1:AddN", 410, 10, {}),
                         ("ExecutorState::Process", 410, 30, {}),  # the executor's own span: not an op
                         ("cnn/dense/MatMul:_MklMatMul", 420, 20, {}),
                         ("late:Mul", 460, 5, {})],  # after the last step ended
        "tf_Compute/2": [("ExecutorState::ProcessAsync::Start", 405, 4, {"kernel_type": "_Recv"}),
                         ("adam/mul:Mul", 220, 10, {})],
    })
    profile = op_profile.read(logdir)
    assert profile.step_seconds == pytest.approx((100e-6, 50e-6))
    assert profile.step_periods == pytest.approx((200e-6,))  # start to the next start: the gap between calls in
    assert profile.op_seconds == pytest.approx({"_MklNativeFusedConv2D": 40e-6, "Mul": 10e-6, "AddN": 10e-6,
                                                "_MklNativeConv2DBackpropFilterWithBias": 40e-6,
                                                "_Recv": 4e-6, "_MklMatMul": 20e-6})
    per_step = profile.per_step()
    assert list(per_step)[:2] == [op_profile.CONV_FORWARD, op_profile.CONV_FILTER]
    assert per_step[op_profile.ALL_REDUCE] == pytest.approx(7e-6)
    assert per_step[op_profile.OTHER] == pytest.approx(5e-6)
    assert profile.share(op_profile.DENSE) == pytest.approx(20 / 124)


def test_a_trace_without_an_untraced_step_or_without_a_file_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"tf.profiler.experimental.start\(logdir\)"):
        op_profile.read(tmp_path)
    logdir = _trace(tmp_path / "t", {"python": [("multi_step_on_iterator", 0, 1, {"tf_function_call": "traced"})]})
    with pytest.raises(ValueError, match="warm the function up"):
        op_profile.read(logdir)


def test_the_flops_per_owner_add_up_to_the_training_flops_less_the_datas_gradient():
    from course_utils import models, peak

    model = models.build_cnn((28, 28, 1), 10)
    found = op_profile.flops_per_image(model)
    conv1_forward = 2 * 26 * 26 * 9 * 1 * 32
    assert found[op_profile.CONV_FORWARD] == found[op_profile.CONV_FILTER]
    assert found[op_profile.CONV_INPUT] == found[op_profile.CONV_FORWARD] - conv1_forward
    assert sum(found.values()) == peak.training_flops(model) - conv1_forward


def test_a_real_trace_of_keras_fit_names_the_convolutions(tmp_path):
    import keras
    import numpy as np
    import tensorflow as tf

    from course_utils import models

    model = models.build_cnn((12, 12, 1), 3)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.random.default_rng(0).random((64, 12, 12, 1), dtype=np.float32), np.zeros(64, dtype=np.int32)
    model.fit(x, y, batch_size=16, verbose=0)  # traces the step
    tf.profiler.experimental.start(str(tmp_path))
    try:
        model.fit(x, y, batch_size=16, verbose=0)
    finally:
        tf.profiler.experimental.stop()
    profile = op_profile.read(tmp_path)
    assert profile.steps == 4
    assert len(profile.step_periods) == 3  # between the 4 calls, each at least its step's wall time
    assert all(p >= s for p, s in zip(profile.step_periods, profile.step_seconds))
    per_step = profile.per_step()
    for name in (op_profile.CONV_FORWARD, op_profile.CONV_FILTER, op_profile.CONV_INPUT, op_profile.DENSE):
        assert per_step.get(name, 0) > 0, per_step


def test_combined_profiles_average_their_op_time_over_all_their_steps():
    first = op_profile.Profile((0.010, 0.012), {"Conv2D": 0.004, "AddN": 0.002}, (0.015,))
    second = op_profile.Profile((0.020,), {"Conv2D": 0.005, "MatMul": 0.003})
    both = op_profile.combine([first, second])
    assert both.step_seconds == (0.010, 0.012, 0.020) and both.steps == 3
    assert both.step_periods == (0.015,)  # periods stay within their recording: none across two
    assert both.op_seconds == pytest.approx({"Conv2D": 0.009, "AddN": 0.002, "MatMul": 0.003})
    per_step = both.per_step()
    assert per_step[op_profile.CONV_FORWARD] == pytest.approx(0.003)
    assert per_step[op_profile.ALL_REDUCE] == pytest.approx(0.002 / 3)
    assert first.op_seconds == {"Conv2D": 0.004, "AddN": 0.002}  # the inputs are left as they were
    with pytest.raises(ValueError, match="no profile"):
        op_profile.combine([])
