%% Erlang/OTP peer: crash to service restored. A one_for_one supervisor
%% (no intensity bound in reach) holds a registered gen_server child;
%% each round kills the child (exit(Pid, kill)) and times until a
%% gen_server:call through its registered name succeeds again, retrying
%% calls that find no process. Prints "restore <median ns>".
%%   erl -noshell -pa DIR -run restore main N -s init stop
-module(restore).
-behaviour(supervisor).
-export([main/1, init/1, start_link/0, handle_call/3, handle_cast/2]).

main([NArg]) ->
    N = list_to_integer(NArg),
    %% A supervisor reports every child's death; printing 1,000 reports
    %% is not what is timed.
    logger:set_primary_config(level, none),
    {ok, _} = supervisor:start_link({local, restore_sup}, ?MODULE, sup),
    ok = gen_server:call(counter, ping),
    Times = [round_trip() || _ <- lists:seq(1, N)],
    Sorted = lists:sort(Times),
    io:format("restore ~B~n", [lists:nth(N div 2 + 1, Sorted)]).

round_trip() ->
    Pid = whereis(counter),
    T0 = erlang:monotonic_time(nanosecond),
    exit(Pid, kill),
    call_until_new(Pid),
    erlang:monotonic_time(nanosecond) - T0.

%% Calls until a process other than the killed one answers.
call_until_new(Old) ->
    case catch gen_server:call(counter, ping) of
        ok ->
            case whereis(counter) of
                Old -> call_until_new(Old);
                _ -> ok
            end;
        _ -> call_until_new(Old)
    end.

init(sup) ->
    Child = #{id => counter, start => {?MODULE, start_link, []}, restart => permanent},
    {ok, {#{strategy => one_for_one, intensity => 1000000, period => 1}, [Child]}};
init(server) ->
    {ok, 0}.

start_link() ->
    gen_server:start_link({local, counter}, ?MODULE, server, []).

handle_call(ping, _From, N) -> {reply, ok, N + 1}.
handle_cast(_, N) -> {noreply, N}.
