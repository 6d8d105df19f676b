%% Erlang distribution peer: message round trips between processes on two
%% nodes of one machine, one "<name> <ns per op>" line each.
%%   erl -sname B -setcookie C -noshell -pa DIR          (the serving node)
%%   erl -sname A -setcookie C -noshell -pa DIR -run dist main N B -s init stop
%%
%%   dist_null    a round trip to a process on node B: an atom each way
%%   dist_str100  a 100-character string there, its length back
%% Each measure runs twice and reports the second run.
-module(dist).
-export([main/1, serve/0]).

main([NArg, Peer]) ->
    N = list_to_integer(NArg),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    PeerNode = list_to_atom(Peer ++ "@" ++ Host),
    pong = wait_for(PeerNode, 400),
    Server = spawn(PeerNode, dist, serve, []),
    Str = lists:duplicate(100, $x),
    time(dist_null, N, fun(K) -> call_loop(Server, ping, K) end),
    time(dist_str100, N, fun(K) -> call_loop(Server, Str, K) end),
    exit(Server, kill).

wait_for(Node, 0) -> net_adm:ping(Node);
wait_for(Node, K) ->
    case net_adm:ping(Node) of
        pong -> pong;
        pang -> timer:sleep(50), wait_for(Node, K - 1)
    end.

time(Name, N, F) ->
    F(N),
    T0 = erlang:monotonic_time(nanosecond),
    F(N),
    T1 = erlang:monotonic_time(nanosecond),
    io:format("~s ~.2f~n", [Name, (T1 - T0) / N]).

call_loop(_, _, 0) -> ok;
call_loop(Server, Msg, K) ->
    Server ! {self(), Msg},
    receive {reply, _} -> ok end,
    call_loop(Server, Msg, K - 1).

serve() ->
    receive
        {From, ping} -> From ! {reply, pong};
        {From, S} when is_list(S) -> From ! {reply, length(S)}
    end,
    serve().
