"""Recorders of many agents, grouped by what they record: PettingZoo's parallel and AEC envs
(:mod:`.pettingzoo`: :class:`RecordParallelEpisode`, :class:`RecordAECEpisode`) and SuperSuit's vectorised games
(:mod:`.supersuit`: :class:`RecordSuperSuitGame`), on what they share (:mod:`.recording`: :class:`AgentsRecording`);
the episode's video (:mod:`.video`: :class:`AgentsVideo`, :class:`AgentsOptions`), each agent's part of it
(:mod:`.track`: :class:`AgentTrack`), its drawing and encoding (:mod:`.draw`), run in the recorder's drawing process
(:mod:`.draw_worker`: :class:`DrawWorker`, ``python -m rlviz.record.agents.draw_worker``), and
:func:`~.play.play_agents` (one episode of a policy per agent). Import the recorders from :mod:`rlviz.record`;
importing this package loads none of them (nor PettingZoo)."""

__all__: list[str] = []
